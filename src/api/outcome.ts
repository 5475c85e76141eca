// The result of one transfer call, as one discriminated union. The client never throws for a response
// or a network failure: every result is one of these, so the worker's switch is exhaustive.
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
      /** 'already-associated' = the 400 of the spec; 'repeat-success' = a 200 that created no new transfer. */
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
      /** The parsed body: it goes to the audit stream, since something may have happened to someone. */
      result: TransferResult;
      /** What did not match: "200 for learner 12, asked for 11", "transfer status 'pending', not 'completed'". */
      message: string;
    })
  | (Base & { code: 'rate-limited'; status: 429; retryAfterMs?: number; error?: string; message?: string })
  | (Base & { code: 'unauthorized'; status: 401; error?: string; message?: string })
  | (Base & {
      code: 'network-error';
      /** undici's error code (UND_ERR_*, ECONNREFUSED, ECONNRESET, ...) or 'ABORT_ERR' for our timeout. */
      errorCode: string;
      message: string;
      /** false only when the request provably never left this machine (connection refused or not opened). */
      maybeDelivered: boolean;
    })
  | (Base & {
      code: 'bad-response';
      status: number;
      message: string;
      /** The first bytes of the body, for the operator (never contains our token: it is the server's text). */
      bodyStart?: string;
      /**
       * The text of a 200 (whole, or as far as it arrived): the transfer may have happened, and this is
       * all that is left of what it deleted, so the worker puts it in the audit stream.
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
