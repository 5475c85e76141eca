// The result of one transfer call, a discriminated union: the client never throws for a
// response or a network failure, so the worker's switch is exhaustive.
import type { OutcomeCode } from '../outcomes/codes.ts';
import type { TransferResult } from './schemas.ts';

interface Base {
  /** Milliseconds from send to the end of the response (or the failure). */
  durationMs: number;
}

export type TransferOutcome =
  | (Base & { code: 'transferred'; status: 200; result: TransferResult })
  | (Base & {
      code: 'already-in-org';
      status: 200 | 400;
      /**
       * 'already-associated': the spec's 400; 'repeat-success': a 200 that created no transfer.
       */
      via: 'already-associated' | 'repeat-success';
      result?: TransferResult;
      error?: string;
      message?: string;
    })
  | (Base & {
      code: 'not-found' | 'forbidden' | 'invalid-request' | 'server-error';
      status: number;
      error?: string;
      message?: string;
    })
  | (Base & {
      code: 'unexpected-result';
      status: 200;
      /** The parsed body, for the audit: something may have happened to someone. */
      result: TransferResult;
      /** What did not match: "200 for learner 12, asked for 11". */
      message: string;
    })
  | (Base & { code: 'rate-limited'; status: 429; retryAfterMs?: number; error?: string; message?: string })
  | (Base & { code: 'unauthorized'; status: 401; error?: string; message?: string })
  | (Base & {
      code: 'network-error';
      /** undici's error code (UND_ERR_*, ECONNREFUSED, ...) or 'ABORT_ERR' for our timeout. */
      errorCode: string;
      message: string;
      /** false only when the request provably never left this machine. */
      maybeDelivered: boolean;
    })
  | (Base & {
      code: 'bad-response';
      status: number;
      message: string;
      /** The first bytes of the body, for the operator (the server's text). */
      bodyStart?: string;
      /**
       * The text of a 200 (as far as it arrived): all that is left of the transfer, for the
       * audit.
       */
      body?: string;
    });

// Compile-time proof that the union covers exactly the table's codes.
type _Covers = OutcomeCode extends TransferOutcome['code']
  ? TransferOutcome['code'] extends OutcomeCode
    ? true
    : never
  : never;
export const _outcomeUnionCoversTable: _Covers = true;
