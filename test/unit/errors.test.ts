// The one catalogue of error codes (fastify's test/internals/errors.test.js in manner): its codes, each
// with an exit status and a description, docs/errors.md documenting exactly them, and the CLI giving each
// code its status in one sentence, never a stack.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startDeadline, Stalls } from '../../src/api/deadline.ts';
import { EXIT, reportCliError } from '../../src/cli/shared.ts';
import {
  ConfigError,
  ERRORS,
  LearnerTransferError,
  type ErrorCode,
  type HttpErrorCode,
} from '../../src/core/errors.ts';
import { DashboardError } from '../../src/dashboard/deps.ts';
import { ROOT } from '../helpers/cli.ts';

const CODES = Object.keys(ERRORS) as ErrorCode[];

/** The rows of docs/errors.md's tables: code, exit column, HTTP column. */
function documented(): Map<string, { exit: string; http: string }> {
  const doc = readFileSync(join(ROOT, 'docs/errors.md'), 'utf8');
  const rows = new Map<string, { exit: string; http: string }>();
  for (const line of doc.split('\n')) {
    const m = /^\| `([A-Z_]+)` \| ([^|]*) \| ([^|]*) \|/.exec(line);
    if (!m) continue;
    expect(rows.has(m[1] as string), `${m[1]} is documented once`).toBe(false);
    rows.set(m[1] as string, { exit: (m[2] as string).trim(), http: (m[3] as string).trim() });
  }
  return rows;
}

/** Calls reportCliError with a fake write: what it printed, and the status it returned. */
function report(err: unknown): { status: number; printed: string } {
  let printed = '';
  const status = reportCliError(err, (text) => {
    printed += text;
  });
  return { status, printed };
}

describe('the error catalogue', () => {
  it('has exactly these codes', () => {
    expect(CODES).toHaveLength(34);
    expect([...CODES].sort()).toEqual([
      'ABORT_ERR',
      'LT_ATTEMPT_FAILED',
      'LT_BODY_TOO_LARGE',
      'LT_CONFIG_INVALID',
      'LT_HTTP_BAD_REQUEST',
      'LT_HTTP_CONFIRM_PERMANENT',
      'LT_HTTP_CSRF',
      'LT_HTTP_FORBIDDEN_HOST',
      'LT_HTTP_HELD_ELSEWHERE',
      'LT_HTTP_INTERNAL',
      'LT_HTTP_IN_FLIGHT',
      'LT_HTTP_NOT_FOUND',
      'LT_HTTP_NOT_WAITING',
      'LT_HTTP_READ_ONLY',
      'LT_HTTP_TOO_MANY_FAILURES',
      'LT_HTTP_TOO_MANY_STREAMS',
      'LT_HTTP_UNAUTHORIZED',
      'LT_HTTP_VIEWER',
      'LT_INPUT_INVALID',
      'LT_INPUT_UNREADABLE',
      'LT_INTERNAL',
      'LT_NOT_SENT',
      'LT_NO_TOKEN',
      'LT_ORG_ID_TAKEN',
      'LT_OUTPUT_UNSAFE',
      'LT_PROXY_TUNNEL',
      'LT_REDIS_PERMISSION',
      'LT_REDIS_UNREACHABLE',
      'LT_REDIS_WRITE_REFUSED',
      'LT_SIMULATOR_BAD_JSON',
      'LT_SIMULATOR_OPTIONS',
      'LT_TOKEN_BOUND',
      'LT_UNKNOWN_ORG',
      'LT_USAGE',
    ]);
  });

  it('gives each code a kind, an exit status of the README, and a one-line description', () => {
    const statuses = new Set<number>(Object.values(EXIT));
    for (const code of CODES) {
      const info = ERRORS[code];
      expect(info.kind, code).toMatch(/^[a-z]+$/);
      expect(statuses.has(info.exit), `${code} exits ${info.exit}`).toBe(true);
      expect(info.exit, code).not.toBe(EXIT.ok);
      expect(info.description.length, code).toBeGreaterThan(10);
      expect(info.description, code).not.toMatch(/\n/);
      // An HTTP answer exactly for the errors an HTTP surface sends.
      expect(info.http !== undefined, code).toBe(info.kind === 'http');
    }
  });

  it('keeps the exit statuses the CLI has always given (README, Exit codes)', () => {
    expect(
      Object.fromEntries(
        (
          [
            'LT_USAGE',
            'LT_UNKNOWN_ORG',
            'LT_ORG_ID_TAKEN',
            'LT_OUTPUT_UNSAFE',
            'LT_CONFIG_INVALID',
            'LT_TOKEN_BOUND',
            'LT_REDIS_UNREACHABLE',
            'LT_REDIS_WRITE_REFUSED',
            'LT_INPUT_INVALID',
            'LT_INPUT_UNREADABLE',
            'LT_NO_TOKEN',
            'LT_REDIS_PERMISSION',
            'LT_INTERNAL',
          ] as const
        ).map((c) => [c, ERRORS[c].exit]),
      ),
    ).toEqual({
      LT_USAGE: 2,
      LT_UNKNOWN_ORG: 2,
      LT_ORG_ID_TAKEN: 2,
      LT_OUTPUT_UNSAFE: 2,
      LT_CONFIG_INVALID: 3,
      LT_TOKEN_BOUND: 3,
      LT_REDIS_UNREACHABLE: 4,
      LT_REDIS_WRITE_REFUSED: 4,
      LT_INPUT_INVALID: 5,
      LT_INPUT_UNREADABLE: 5,
      LT_NO_TOKEN: 6,
      LT_REDIS_PERMISSION: 7,
      LT_INTERNAL: 1,
    });
  });

  it("keeps the dashboard's answers: the status and the `error` string of docs/dashboard-api.md", () => {
    const http = Object.fromEntries(
      CODES.filter((c) => ERRORS[c].http).map((c) => [
        c,
        `${ERRORS[c].http?.status} ${ERRORS[c].http?.error}`,
      ]),
    );
    expect(http).toEqual({
      LT_HTTP_BAD_REQUEST: '400 bad-request',
      LT_HTTP_UNAUTHORIZED: '401 unauthorized',
      LT_HTTP_CSRF: '403 csrf',
      LT_HTTP_READ_ONLY: '403 read-only',
      LT_HTTP_VIEWER: '403 viewer',
      LT_HTTP_CONFIRM_PERMANENT: '400 confirm-permanent',
      LT_HTTP_FORBIDDEN_HOST: '403 forbidden-host',
      LT_HTTP_NOT_FOUND: '404 not-found',
      LT_HTTP_NOT_WAITING: '409 not-waiting',
      LT_HTTP_HELD_ELSEWHERE: '409 held-elsewhere',
      LT_HTTP_IN_FLIGHT: '409 in-flight',
      LT_HTTP_TOO_MANY_FAILURES: '429 too-many-failures',
      LT_HTTP_TOO_MANY_STREAMS: '503 too-many-streams',
      LT_HTTP_INTERNAL: '500 internal',
      LT_SIMULATOR_BAD_JSON: '400 Invalid request',
    });
    const err = new DashboardError('LT_HTTP_HELD_ELSEWHERE', 'held by beta');
    expect(err).toBeInstanceOf(LearnerTransferError);
    expect(err).toMatchObject({ code: 'LT_HTTP_HELD_ELSEWHERE', statusCode: 409, answer: 'held-elsewhere' });
    // An error no HTTP surface answers has no status: the dashboard answers it 500 as before.
    expect(new LearnerTransferError('LT_USAGE', 'x').statusCode).toBeUndefined();
  });

  it('is documented in docs/errors.md, code by code, with the same exit status and HTTP answer', () => {
    const rows = documented();
    expect([...rows.keys()].sort()).toEqual([...CODES].sort());
    for (const code of CODES) {
      const info = ERRORS[code];
      const row = rows.get(code);
      expect(row?.exit, code).toBe(String(info.exit));
      expect(row?.http, code).toBe(info.http ? `${info.http.status} \`${info.http.error}\`` : '—');
    }
  });
});

describe('reportCliError', () => {
  it('gives every catalogued code its exit status, in one sentence without a stack', () => {
    for (const code of CODES) {
      const { status, printed } = report(new LearnerTransferError(code, `something about ${code}`));
      expect(status, code).toBe(ERRORS[code].exit);
      expect(printed, code).toMatch(
        new RegExp(`^learner-transfer: (internal error: )?something about ${code}\\n$`),
      );
      expect(printed, code).not.toMatch(/\n\s+at /);
      expect(printed, code).not.toContain('unexpected error');
    }
  });

  it('does the same for the subclasses: configuration and dashboard errors', () => {
    expect(report(new ConfigError(['REDIS_URL: expected a URL, got nothing']))).toEqual({
      status: EXIT.config,
      printed: 'learner-transfer: invalid configuration:\n  - REDIS_URL: expected a URL, got nothing\n',
    });
    const http: HttpErrorCode = 'LT_HTTP_NOT_FOUND';
    expect(report(new DashboardError(http, 'no run x')).status).toBe(ERRORS[http].exit);
  });

  it('says an internal error is one, and still shows the stack of an error outside the catalogue', () => {
    expect(report(new LearnerTransferError('LT_INTERNAL', 'limiter: unexpected script reply x'))).toEqual({
      status: 1,
      printed: 'learner-transfer: internal error: limiter: unexpected script reply x\n',
    });
    const foreign = report(new TypeError('x is not a function'));
    expect(foreign.status).toBe(ERRORS.LT_INTERNAL.exit);
    expect(foreign.printed).toMatch(
      /^learner-transfer: unexpected error: TypeError: x is not a function\n\s+at /,
    );
  });
});

describe('errors of src/', () => {
  it('are all catalogued: no bare `new Error(` is left in src/', () => {
    const bare: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (name.endsWith('.ts')) {
          readFileSync(path, 'utf8')
            .split('\n')
            .forEach((line, i) => {
              if (/\bnew Error\(/.test(line)) bare.push(`${path.slice(ROOT.length + 1)}:${i + 1}`);
            });
        }
      }
    };
    walk(join(ROOT, 'src'));
    expect(bare).toEqual([]);
  });

  it("abort a timed-out call with the name and code of Node's own timeout (the classifier's branch)", async () => {
    const deadline = startDeadline(1, new Stalls());
    await new Promise<void>((resolve) => deadline.signal.addEventListener('abort', () => resolve()));
    deadline.clear();
    expect(deadline.signal.reason).toBeInstanceOf(LearnerTransferError);
    expect(deadline.signal.reason).toMatchObject({ name: 'TimeoutError', code: 'ABORT_ERR' });
    expect((deadline.signal.reason as Error).message).toMatch(
      /^The operation was aborted due to timeout \(1 ms\)/,
    );
  });
});
