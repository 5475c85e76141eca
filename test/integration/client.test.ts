// The Learner API client against the simulator on a real socket: every outcome code, every fault, the
// spec's headers, and no token in anything the client returns. Each test has a simulator of its own: it
// sets up the state it asserts on (a learner moved once before the repeat, say), whatever ran before.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LearnerApiClient } from '../../src/api/client.ts';
import type { TransferOutcome } from '../../src/api/outcome.ts';
import { OUTCOME_CODES } from '../../src/outcomes/codes.ts';
import { createSimulator, type Simulator } from '../../src/simulator/index.ts';

const TOKEN = 'sim-acme-1';
let sim: Simulator;
let client: LearnerApiClient;

/** No token in anything the client returns. */
function track(o: TransferOutcome): TransferOutcome {
  expect(JSON.stringify(o)).not.toContain(TOKEN);
  return o;
}

beforeEach(async () => {
  sim = createSimulator({
    learners: 400,
    forbiddenLearnerIds: [11],
    failingLearnerIds: [14],
    repeatMode: 'error',
  });
  await sim.listen();
  client = new LearnerApiClient({
    baseUrl: sim.url,
    userAgent: 'lt-test',
    requestTimeoutMs: 2000,
    connectTimeoutMs: 1000,
  });
});

afterEach(async () => {
  await client.close();
  await sim.close();
});

/**
 * A server of our own that answers each PATCH with a valid 200 for the learner and status we queue: the
 * simulator always answers for the learner asked, so it cannot give a 200 that does not fit.
 */
async function startAnswerServer() {
  const answers: { learnerId: number; status: string }[] = [];
  const paths: string[] = [];
  const server = createServer((req, res) => {
    paths.push(`${req.method} ${req.url}`);
    const a = answers.shift() ?? { learnerId: 0, status: 'completed' };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        success: true,
        message: 'Learner transferred successfully',
        data: {
          learnerId: a.learnerId,
          newOwner: 'Acme',
          transferDetails: {
            transferId: `trf_${a.learnerId}`,
            initiatedAt: '2026-11-22T01:02:03.123456Z',
            status: a.status,
            assessmentIds: [],
          },
          learnerGroups: { removed: [], added: [] },
          authorizations: { revoked: [] },
        },
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const c = new LearnerApiClient({
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    userAgent: 'x',
    requestTimeoutMs: 1000,
    connectTimeoutMs: 500,
  });
  return {
    client: c,
    answers,
    paths,
    async close() {
      await c.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('transferLearner', () => {
  it('transferred: a learner of another organization, with the full audit body', async () => {
    const o = track(await client.transferLearner(2, TOKEN)); // learner 2 is in beta
    expect(o.code).toBe('transferred');
    if (o.code !== 'transferred') return;
    expect(o.result.data.learnerId).toBe(2);
    expect(o.result.data.transferDetails.status).toBe('completed');
    expect(o.result.data.transferDetails.initiatedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(sim.learner(2)?.organizationId).toBe(1);
    const req = sim.record.at(-1);
    expect(req?.method).toBe('PATCH');
    expect(req?.tokenLabel).toBe('acme#1');
  });

  it('already-in-org: the 400 "already associated" of the spec', async () => {
    expect(track(await client.transferLearner(2, TOKEN)).code).toBe('transferred');
    const o = track(await client.transferLearner(2, TOKEN));
    expect(o).toMatchObject({
      code: 'already-in-org',
      status: 400,
      via: 'already-associated',
      error: 'Invalid request',
    });
  });

  it('already-in-org: a 200 repeat that returns the transfer we already hold', async () => {
    expect(track(await client.transferLearner(2, TOKEN)).code).toBe('transferred');
    sim.setRepeatMode('success');
    const first = sim.transfersOf(2)[0]?.data.transferDetails.transferId;
    expect(first).toBeTruthy();
    const o = track(await client.transferLearner(2, TOKEN, { previousTransferId: first }));
    expect(o).toMatchObject({ code: 'already-in-org', status: 200, via: 'repeat-success' });
    expect(sim.ownerChanges(2)).toBe(1);
  });

  it('not-found, forbidden, server-error and unauthorized from their statuses', async () => {
    expect(track(await client.transferLearner(999_999, TOKEN))).toMatchObject({
      code: 'not-found',
      status: 404,
      error: 'Learner not found',
    });
    expect(track(await client.transferLearner(11, TOKEN))).toMatchObject({ code: 'forbidden', status: 403 });
    expect(track(await client.transferLearner(14, TOKEN))).toMatchObject({
      code: 'server-error',
      status: 500,
      error: 'Transfer failed',
    });
    expect(track(await client.transferLearner(3, 'not-a-real-token'))).toMatchObject({
      code: 'unauthorized',
      status: 401,
    });
    // A token without the permission to transfer: 403 as the spec says.
    expect(track(await client.transferLearner(3, 'sim-gamma-readonly'))).toMatchObject({
      code: 'forbidden',
      status: 403,
    });
  });

  it('rate-limited with Retry-After in ms', async () => {
    sim.setLimits({ perToken: { max: 1, windowMs: 3000 }, window: 'rolling' });
    try {
      track(await client.transferLearner(5, TOKEN));
      const o = track(await client.transferLearner(8, TOKEN));
      expect(o.code).toBe('rate-limited');
      if (o.code !== 'rate-limited') return;
      expect(o.retryAfterMs).toBeGreaterThanOrEqual(1000);
      expect(o.retryAfterMs).toBeLessThanOrEqual(3000);
    } finally {
      sim.setLimits(undefined);
    }
  });

  it('bad-response: a 200 whose body was cut (the transfer happened)', async () => {
    sim.setFaults({ truncateRate: 1 });
    try {
      const o = track(await client.transferLearner(20, TOKEN));
      expect(o.code).toBe('bad-response');
      expect(sim.ownerChanges(20)).toBe(1);
      // The retry resolves to already-in-org: the at-least-once contract is safe.
      sim.setFaults({});
      expect(track(await client.transferLearner(20, TOKEN)).code).toBe('already-in-org');
    } finally {
      sim.setFaults({});
    }
  });

  it('unexpected-result: a valid 200 for another learner, or not completed, over real HTTP', async () => {
    const { client: c, answers, paths, close } = await startAnswerServer();
    try {
      answers.push({ learnerId: 12, status: 'completed' });
      expect(track(await c.transferLearner(11, TOKEN))).toMatchObject({
        code: 'unexpected-result',
        status: 200,
        message: '200 for learner 12, asked for 11',
        result: { data: { learnerId: 12, transferDetails: { transferId: 'trf_12' } } },
      });
      // Even with the transfer id we hold: it is not a repeat of ours if it is not about our learner.
      answers.push({ learnerId: 12, status: 'completed' });
      expect(track(await c.transferLearner(11, TOKEN, { previousTransferId: 'trf_12' })).code).toBe(
        'unexpected-result',
      );
      answers.push({ learnerId: 11, status: 'pending' });
      expect(track(await c.transferLearner(11, TOKEN))).toMatchObject({
        code: 'unexpected-result',
        message: "transfer status 'pending', not 'completed'",
      });
      answers.push({ learnerId: 11, status: 'completed' });
      expect(track(await c.transferLearner(11, TOKEN)).code).toBe('transferred');
      expect(paths).toEqual(Array.from({ length: 4 }, () => 'PATCH /1/learner/11/transfer'));
    } finally {
      await close();
    }
  });

  it('network-error: a reset connection may have delivered the request', async () => {
    sim.setFaults({ resetRate: 1 });
    try {
      const o = track(await client.transferLearner(23, TOKEN));
      expect(o.code).toBe('network-error');
      if (o.code !== 'network-error') return;
      expect(o.maybeDelivered).toBe(true);
    } finally {
      sim.setFaults({});
    }
  });

  it('network-error: a refused connection did not deliver it', async () => {
    const dead = new LearnerApiClient({
      baseUrl: 'http://127.0.0.1:1',
      userAgent: 'x',
      requestTimeoutMs: 1000,
      connectTimeoutMs: 500,
    });
    const o = track(await dead.transferLearner(1, TOKEN));
    await dead.close();
    expect(o).toMatchObject({ code: 'network-error', errorCode: 'ECONNREFUSED', maybeDelivered: false });
  });

  it('network-error: a request slower than the timeout', async () => {
    sim.setFaults({ latencyBeforeMs: [3000, 3000] });
    // A timeout of 1 s: the call must be written within it (a call not written by then is not sent at
    // all), which a busy machine can take a few hundred ms to do.
    const slow = new LearnerApiClient({
      baseUrl: sim.url,
      userAgent: 'x',
      requestTimeoutMs: 1000,
      connectTimeoutMs: 1000,
    });
    try {
      const o = track(await slow.transferLearner(26, TOKEN));
      // The timeout ended the call, not the answer: the server has not answered it yet (it holds the
      // request 3 s before counting it), whatever the load. An order of events, not a duration.
      const entry = sim.record.find((r) => r.method === 'PATCH' && r.path.startsWith('/1/learner/26/'));
      expect(entry, JSON.stringify(sim.record)).toBeDefined();
      expect(entry?.respondedAt).toBeUndefined();
      expect(entry?.status).toBe(0);
      expect(o.code).toBe('network-error');
      if (o.code !== 'network-error') return;
      expect(o.maybeDelivered).toBe(true);
      // A timer never fires early: the call lasted at least its timeout.
      expect(o.durationMs).toBeGreaterThanOrEqual(1000);
    } finally {
      sim.setFaults({});
      await slow.close();
    }
  });

  it('sends the spec headers and body {} on every transfer', async () => {
    const own = createSimulator({ learners: 10 });
    const seenHeaders: Record<string, unknown>[] = [];
    const bodies: unknown[] = [];
    own.app.addHook('preHandler', async (req) => {
      seenHeaders.push({ ...req.headers });
      bodies.push(req.body);
    });
    await own.listen();
    const c = new LearnerApiClient({
      baseUrl: own.url,
      userAgent: 'Acme Corp migration',
      requestTimeoutMs: 1000,
      connectTimeoutMs: 500,
    });
    try {
      expect((await c.transferLearner(2, TOKEN)).code).toBe('transferred');
      expect((await c.listLearners(1, TOKEN)).ok).toBe(true);
    } finally {
      await c.close();
      await own.close();
    }
    expect(seenHeaders[0]).toMatchObject({
      'user-agent': 'Acme Corp migration',
      accept: 'application/json',
      authorization: `Bearer ${TOKEN}`,
      'content-type': 'application/json',
    });
    expect(bodies[0]).toEqual({});
    expect(seenHeaders[1]).toMatchObject({ accept: 'application/json', authorization: `Bearer ${TOKEN}` });
    expect(seenHeaders[1]?.['content-type']).toBeUndefined();
  });
});

describe('listLearners', () => {
  it('reads a page with current_page as a string and validates every learner', async () => {
    const r = await client.listLearners(3, TOKEN);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.page.pagination.current_page).toBe(3);
    expect(r.page.pagination.from).toBe(201);
    expect(r.page.pagination.to).toBe(300);
    expect(r.page.data).toHaveLength(100);
    expect(r.page.data[0]?.id).toBe(201);
  });

  it('classifies a refused token', async () => {
    const r = await client.listLearners(1, 'nope');
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.outcome.code).toBe('unauthorized');
  });
});

describe('coverage of the outcome table', () => {
  it('every code except invalid-request is produced by a real response', async () => {
    // invalid-request has no trigger in the spec's service; it is covered by the classify unit tests.
    const own = await startAnswerServer();
    const dead = new LearnerApiClient({
      baseUrl: 'http://127.0.0.1:1',
      userAgent: 'x',
      requestTimeoutMs: 1000,
      connectTimeoutMs: 500,
    });
    const produced = new Set<string>();
    const got = async (o: Promise<TransferOutcome>) => produced.add(track(await o).code);
    try {
      await got(client.transferLearner(2, TOKEN)); // transferred
      await got(client.transferLearner(2, TOKEN)); // already-in-org
      await got(client.transferLearner(999_999, TOKEN)); // not-found
      await got(client.transferLearner(11, TOKEN)); // forbidden
      await got(client.transferLearner(14, TOKEN)); // server-error
      await got(client.transferLearner(3, 'not-a-real-token')); // unauthorized
      await got(dead.transferLearner(1, TOKEN)); // network-error
      own.answers.push({ learnerId: 12, status: 'completed' });
      await got(own.client.transferLearner(11, TOKEN)); // unexpected-result
      sim.setFaults({ truncateRate: 1 });
      await got(client.transferLearner(20, TOKEN)); // bad-response
      sim.setFaults({});
      sim.setLimits({ perToken: { max: 1, windowMs: 3000 }, window: 'rolling' });
      await got(client.transferLearner(5, TOKEN));
      await got(client.transferLearner(8, TOKEN)); // rate-limited
    } finally {
      await own.close();
      await dead.close();
    }
    expect(OUTCOME_CODES.filter((c) => c !== 'invalid-request' && !produced.has(c))).toEqual([]);
  });
});
