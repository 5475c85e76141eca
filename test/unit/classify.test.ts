// The classification table, exhaustively: every status and body shape to its stable code.
import { describe, expect, it } from 'vitest';
import { classifyNetworkError, classifyResponse } from '../../src/api/classify.ts';
import { parseRetryAfter } from '../../src/api/retry-after.ts';
import { OUTCOMES, OUTCOME_CODES } from '../../src/outcomes/codes.ts';

const ok = {
  success: true,
  message: 'Learner transferred',
  data: {
    learnerId: 7,
    newOwner: 'Acme',
    transferDetails: {
      transferId: 'trf_1',
      initiatedAt: '2026-11-22T01:02:03.123456Z',
      status: 'completed',
      assessmentIds: ['a1'],
    },
    learnerGroups: { removed: [{ id: 1, name: 'g', description: 'd' }], added: [] },
    authorizations: { revoked: [] },
    unknownField: 'tolerated',
  },
};
const ctx = { durationMs: 5 };

describe('classifyResponse', () => {
  const table: [number, unknown, string][] = [
    [200, ok, 'transferred'],
    [
      400,
      {
        success: false,
        error: 'Invalid request',
        message: "Learner is already associated with the caller's organization",
      },
      'already-in-org',
    ],
    [
      400,
      { success: false, error: 'Invalid request', message: 'learnerId must be an integer' },
      'invalid-request',
    ],
    [
      400,
      { success: false, error: 'Invalid request', message: 'A transfer is already in progress' },
      'invalid-request',
    ],
    [401, { success: false, error: 'Unauthorized' }, 'unauthorized'],
    [403, { success: false, error: 'Unauthorized', message: 'Caller lacks permission' }, 'forbidden'],
    [
      404,
      { success: false, error: 'Learner not found', message: 'No learner exists with ID 7' },
      'not-found',
    ],
    [422, undefined, 'invalid-request'],
    [429, { success: false, error: 'Too Many Requests' }, 'rate-limited'],
    [500, { success: false, error: 'Transfer failed' }, 'server-error'],
    [502, undefined, 'server-error'],
    [503, undefined, 'server-error'],
    [408, undefined, 'server-error'],
    [200, { success: true }, 'bad-response'],
    [
      200,
      { ...ok, data: { ...ok.data, transferDetails: { ...ok.data.transferDetails, transferId: '' } } },
      'bad-response',
    ],
    [302, undefined, 'bad-response'],
  ];
  it.each(table)('%i %j -> %s', (status, body, code) => {
    expect(classifyResponse(status, body, '', ctx).code).toBe(code);
  });

  it('a 200 carrying the transfer id we hold is a repeat, not a new transfer', () => {
    const o = classifyResponse(200, ok, '', { ...ctx, previousTransferId: 'trf_1' });
    expect(o).toMatchObject({ code: 'already-in-org', via: 'repeat-success', status: 200 });
    expect(classifyResponse(200, ok, '', { ...ctx, previousTransferId: 'trf_0' }).code).toBe('transferred');
  });

  it('a 200 for another learner, or not "completed", is unexpected-result, never a success', () => {
    const asked = { ...ctx, learnerId: 11 };
    const other = { ...ok, data: { ...ok.data, learnerId: 12 } };
    expect(classifyResponse(200, other, '', asked)).toMatchObject({
      code: 'unexpected-result',
      status: 200,
      message: '200 for learner 12, asked for 11',
      result: { data: { learnerId: 12 } },
    });
    // Not even when it carries the transfer id we hold, or says "already associated".
    expect(
      classifyResponse(
        200,
        { ...other, message: "Learner is already associated with the caller's organization" },
        '',
        { ...asked, previousTransferId: 'trf_1' },
      ).code,
    ).toBe('unexpected-result');
    const pending = {
      ...ok,
      data: { ...ok.data, transferDetails: { ...ok.data.transferDetails, status: 'pending' } },
    };
    expect(classifyResponse(200, pending, '', { ...ctx, learnerId: 7 })).toMatchObject({
      code: 'unexpected-result',
      message: "transfer status 'pending', not 'completed'",
    });
    expect(
      classifyResponse(200, pending, '', { ...ctx, learnerId: 7, previousTransferId: 'trf_1' }).code,
    ).toBe('unexpected-result');
    // Both wrong: both named.
    expect(
      classifyResponse(200, { ...pending, data: { ...pending.data, learnerId: 12 } }, '', {
        ...ctx,
        learnerId: 7,
      }),
    ).toMatchObject({
      message: "200 for learner 12, asked for 7; transfer status 'pending', not 'completed'",
    });
    // The status is compared exactly, as the spec writes it.
    const shouting = {
      ...ok,
      data: { ...ok.data, transferDetails: { ...ok.data.transferDetails, status: 'COMPLETED' } },
    };
    expect(classifyResponse(200, shouting, '', { ...ctx, learnerId: 7 }).code).toBe('unexpected-result');
    // The learner asked for, completed: transferred (or a repeat).
    expect(classifyResponse(200, ok, '', { ...ctx, learnerId: 7 }).code).toBe('transferred');
    expect(classifyResponse(200, ok, '', { ...ctx, learnerId: 7, previousTransferId: 'trf_1' }).code).toBe(
      'already-in-org',
    );
    expect(OUTCOMES['unexpected-result']).toMatchObject({ action: 'fail', success: false });
  });

  it('reads each error field on its own: a malformed one does not lose the other', () => {
    expect(
      classifyResponse(404, { success: false, error: 404, message: 'No learner exists with ID 7' }, '', ctx),
    ).toEqual({ code: 'not-found', status: 404, durationMs: 5, message: 'No learner exists with ID 7' });
    expect(
      classifyResponse(
        400,
        { error: { title: 'x' }, message: "Learner is already associated with the caller's organization" },
        '',
        ctx,
      ),
    ).toMatchObject({ code: 'already-in-org', via: 'already-associated' });
    expect(classifyResponse(403, { success: 'no', error: 'Unauthorized', message: ['a'] }, '', ctx)).toEqual({
      code: 'forbidden',
      status: 403,
      durationMs: 5,
      error: 'Unauthorized',
    });
    expect(classifyResponse(500, ['Transfer failed'], '', ctx)).toEqual({
      code: 'server-error',
      status: 500,
      durationMs: 5,
    });
    expect(classifyResponse(500, null, '', ctx)).toEqual({
      code: 'server-error',
      status: 500,
      durationMs: 5,
    });
    const long = classifyResponse(500, { error: 'e'.repeat(900), message: 'm'.repeat(2000) }, '', ctx);
    expect(long).toMatchObject({ error: 'e'.repeat(500), message: 'm'.repeat(1000) });
  });

  it('keeps the error title and message, and the Retry-After', () => {
    const o = classifyResponse(429, { error: 'Too Many Requests', message: 'slow down' }, '', {
      ...ctx,
      retryAfterMs: 3000,
    });
    expect(o).toMatchObject({
      code: 'rate-limited',
      retryAfterMs: 3000,
      error: 'Too Many Requests',
      message: 'slow down',
    });
  });

  it('every code has exactly one action in the table', () => {
    for (const code of OUTCOME_CODES)
      expect(['complete', 'fail', 'retry', 'wait', 'pause-token']).toContain(OUTCOMES[code].action);
    expect(OUTCOMES['already-in-org'].action).toBe('complete');
    expect(OUTCOMES['rate-limited'].action).toBe('wait');
    expect(OUTCOMES.unauthorized.action).toBe('pause-token');
  });
});

describe('classifyNetworkError', () => {
  it('refused connections were not delivered; resets and timeouts may have been', () => {
    expect(
      classifyNetworkError(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }), 1, false),
    ).toMatchObject({ maybeDelivered: false });
    expect(
      classifyNetworkError(Object.assign(new Error('x'), { code: 'UND_ERR_CONNECT_TIMEOUT' }), 1, false),
    ).toMatchObject({ maybeDelivered: false });
    expect(
      classifyNetworkError(Object.assign(new Error('x'), { code: 'ECONNRESET' }), 1, false),
    ).toMatchObject({ maybeDelivered: true });
    expect(
      classifyNetworkError(Object.assign(new Error('x'), { code: 'UND_ERR_HEADERS_TIMEOUT' }), 1, false),
    ).toMatchObject({ maybeDelivered: true });
    const abort = new Error('aborted');
    abort.name = 'TimeoutError';
    expect(classifyNetworkError(abort, 1, false)).toMatchObject({
      errorCode: 'ABORT_ERR',
      maybeDelivered: true,
    });
    expect(
      classifyNetworkError(
        new Error('wrapped', { cause: Object.assign(new Error('in'), { code: 'ECONNREFUSED' }) }),
        1,
        false,
      ),
    ).toMatchObject({ errorCode: 'ECONNREFUSED' });
  });
});

describe('parseRetryAfter', () => {
  it('reads seconds and HTTP dates', () => {
    expect(parseRetryAfter('120')).toBe(120_000);
    expect(
      parseRetryAfter(new Date(Date.UTC(2030, 0, 1, 0, 0, 10)).toUTCString(), Date.UTC(2030, 0, 1)),
    ).toBe(10_000);
    expect(parseRetryAfter(undefined)).toBeUndefined();
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(['5', '9'])).toBe(5000);
  });
});
