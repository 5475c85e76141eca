// The outcome table, tested as a table: every code's row, and what decide() makes of it on each attempt.
// No Redis: decide() is pure, and the worker, the outcome store and the crawl all read these rows.
import { describe, expect, it } from 'vitest';
import { OUTCOME_CODES, OUTCOMES, SUCCESS_CODES, type OutcomeCode } from '../../src/outcomes/codes.ts';
import { decide } from '../../src/outcomes/decide.ts';
import { BUCKETS, FAILURE_BUCKETS, isFinalBucket, isSuccessBucket } from '../../src/outcomes/record.ts';

// code -> action, success, audit kind, crawl stops, waits instead when the service is unreachable
const ROWS: Record<OutcomeCode, [string, boolean, string | null, boolean, boolean]> = {
  transferred: ['complete', true, 'transfer', false, false],
  'already-in-org': ['complete', true, 'transfer', false, false],
  'not-found': ['fail', false, null, true, false],
  forbidden: ['fail', false, null, true, false],
  'invalid-request': ['fail', false, null, true, false],
  'server-error': ['retry', false, null, false, false],
  'network-error': ['retry', false, null, false, true],
  'bad-response': ['retry', false, 'unreadable', false, false],
  'unexpected-result': ['fail', false, 'unexpected', false, false],
  'rate-limited': ['wait', false, null, false, false],
  unauthorized: ['pause-token', false, null, false, false],
};

describe('the outcome table', () => {
  it.each(OUTCOME_CODES.map((c) => [c]))('%s has its row', (code) => {
    const info = OUTCOMES[code];
    const [action, success, audit, crawlStops, waitsWhenDown] = ROWS[code];
    expect([
      info.action,
      info.success,
      info.audit,
      info.crawlStops,
      info.whenUnreachable === 'wait-org',
    ]).toEqual([action, success, audit, crawlStops, waitsWhenDown]);
    expect(info.description.length).toBeGreaterThan(10);
  });

  it('says how each final outcome feeds the error budget (docs/guard-rails.md)', () => {
    expect(Object.fromEntries(OUTCOME_CODES.map((c) => [c, OUTCOMES[c].halt]))).toEqual({
      transferred: 'success',
      'already-in-org': 'success',
      'not-found': 'not-found',
      forbidden: 'failure',
      'invalid-request': 'failure',
      'server-error': 'failure',
      'network-error': null,
      'bad-response': 'failure',
      'unexpected-result': 'at-once',
      'rate-limited': null,
      unauthorized: null,
    });
    // The one probe of a 5xx storm: an answer that would be retried waits, with no attempt.
    expect(decide('server-error', { attempt: 1, maxAttempts: 3 }, { probe: true })).toMatchObject({
      action: 'wait',
      usesAttempt: false,
      final: false,
    });
    expect(decide('forbidden', { attempt: 1, maxAttempts: 3 }, { probe: true }).action).toBe('fail');
  });

  it('lists every code once, and the success codes are the success buckets', () => {
    expect(Object.keys(ROWS).sort()).toEqual([...OUTCOME_CODES].sort());
    expect(new Set(OUTCOME_CODES).size).toBe(OUTCOME_CODES.length);
    expect(SUCCESS_CODES).toEqual(['transferred', 'already-in-org']);
    expect(BUCKETS.filter(isSuccessBucket)).toEqual(SUCCESS_CODES);
    // cancelled is final and not a success, yet no failure: retry-all and the failures page leave it.
    expect(FAILURE_BUCKETS).toEqual(
      BUCKETS.filter((b) => isFinalBucket(b) && !isSuccessBucket(b) && b !== 'cancelled'),
    );
    expect(isFinalBucket('cancelled')).toBe(true);
    expect(FAILURE_BUCKETS).not.toContain('retrying');
    expect(FAILURE_BUCKETS).toContain('worker-error');
    // plan --check --apply's held learners: final, not a success, retried like a failure.
    expect(FAILURE_BUCKETS).toContain('held');
  });
});

describe('decide(code, attempt)', () => {
  // code, attempt of 3 -> bucket, final, uses an attempt
  const cases: Array<[OutcomeCode, number, string, boolean, boolean]> = [
    ['transferred', 1, 'transferred', true, true],
    ['already-in-org', 3, 'already-in-org', true, true],
    ['not-found', 1, 'not-found', true, true],
    ['forbidden', 2, 'forbidden', true, true],
    ['invalid-request', 1, 'invalid-request', true, true],
    ['unexpected-result', 1, 'unexpected-result', true, true],
    ['server-error', 1, 'retrying', false, true],
    ['server-error', 2, 'retrying', false, true],
    ['server-error', 3, 'server-error', true, true],
    ['network-error', 1, 'retrying', false, true],
    ['network-error', 3, 'network-error', true, true],
    ['bad-response', 2, 'retrying', false, true],
    ['bad-response', 3, 'bad-response', true, true],
    ['rate-limited', 1, 'retrying', false, false],
    ['rate-limited', 3, 'retrying', false, false],
    ['unauthorized', 3, 'retrying', false, false],
  ];
  it.each(cases)(
    '%s on attempt %i of 3 -> %s (final %s, uses an attempt %s)',
    (code, attempt, bucket, final, uses) => {
      const d = decide(code, { attempt, maxAttempts: 3 });
      expect([d.bucket, d.final, d.usesAttempt]).toEqual([bucket, final, uses]);
      expect(d.action).toBe(OUTCOMES[code].action);
    },
  );

  it('an unreachable service turns only the codes that allow it into a wait that uses no attempt', () => {
    for (const code of OUTCOME_CODES) {
      const d = decide(code, { attempt: 3, maxAttempts: 3 }, { unreachable: true });
      if (code === 'network-error') {
        expect(d).toEqual({ action: 'wait', bucket: 'retrying', final: false, usesAttempt: false });
      } else {
        expect(d).toEqual(decide(code, { attempt: 3, maxAttempts: 3 }));
      }
    }
  });

  it('one attempt allowed: a retryable code is final at once', () => {
    expect(decide('server-error', { attempt: 1, maxAttempts: 1 })).toEqual({
      action: 'retry',
      bucket: 'server-error',
      final: true,
      usesAttempt: true,
    });
  });
});
