// Errors carry a stable `code` to branch on, a `cause`, and never a token; every code is in
// error-codes.ts.
import { ERRORS, type ErrorCode } from './error-codes.ts';

export { ERRORS, EXIT, httpAnswer } from './error-codes.ts';
export type {
  ErrorCode,
  ErrorInfo,
  ErrorKind,
  ExitStatus,
  HttpAnswer,
  HttpErrorCode,
} from './error-codes.ts';

export class LearnerTransferError extends Error {
  readonly code: ErrorCode;
  /** The HTTP status an HTTP surface answers this error with; none for most codes. */
  readonly statusCode: number | undefined;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LearnerTransferError';
    this.code = code;
    this.statusCode = ERRORS[code].http?.status;
  }
}

export class ConfigError extends LearnerTransferError {
  /** Each problem names the variable, what was expected, and (never for a token) what was given. */
  readonly problems: string[];
  constructor(problems: string[]) {
    super('LT_CONFIG_INVALID', `invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}
