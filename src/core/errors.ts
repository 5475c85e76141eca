// Errors carry a stable `code` to branch on (undici's and fastify's style), a `cause`, and never a token.

export type ErrorCode =
  | 'LT_CONFIG_INVALID'
  | 'LT_REDIS_UNREACHABLE'
  | 'LT_INPUT_INVALID'
  | 'LT_INPUT_UNREADABLE'
  | 'LT_UNKNOWN_ORG'
  | 'LT_NO_TOKEN'
  | 'LT_USAGE'
  /** Two organization keys would name one numeric organization (two daily budgets for one). */
  | 'LT_ORG_ID_TAKEN'
  /** A token is bound to another organization key in Redis (two hourly windows for one token). */
  | 'LT_TOKEN_BOUND'
  /** An output file's path is a symbolic link or not a regular file: nothing is written through it. */
  | 'LT_OUTPUT_UNSAFE'
  /** The Redis ACL user lacks a command, key or channel rule the tool needs (docs/redis-acl.md). */
  | 'LT_REDIS_PERMISSION';

export class LearnerTransferError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LearnerTransferError';
    this.code = code;
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
