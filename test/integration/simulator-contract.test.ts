// The simulator against the spec, over real sockets: every field and format of the list and the transfer,
// pagination, every error status with its body, repeat modes, the effects of a transfer, the record.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.ts';

const UA = 'learner-transfer-tests/1.0 (simulator contract)';
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;
const MICRO_ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

const learnerSchema = z.strictObject({
  id: z.number().int().positive(),
  code: z.string().min(1),
  color: z.null(),
  dateOfBirth: z.string().regex(DATE),
  firstName: z.string().min(1),
  lastName: z.string().min(1),
  gender: z.number().int(),
  isActive: z.union([z.literal(0), z.literal(1)]),
  createdAt: z.string().regex(DATE_TIME),
  updatedAt: z.string().regex(DATE_TIME),
  organizationId: z.number().int(),
  parent: z.null(),
  userId: z.number().int().nullable(),
  reportsGenerated: z.literal(0),
  v2id: z.null(),
});

const listSchema = z.strictObject({
  data: z.array(learnerSchema).max(100),
  pagination: z.strictObject({
    total: z.number().int(),
    per_page: z.literal(100),
    current_page: z.string(),
    last_page: z.number().int(),
    from: z.number().int().nullable(),
    to: z.number().int().nullable(),
  }),
});

const groupSchema = z.strictObject({ id: z.number().int(), name: z.string(), description: z.string() });
const transferSchema = z.strictObject({
  success: z.literal(true),
  message: z.string().min(1),
  data: z.strictObject({
    learnerId: z.number().int(),
    newOwner: z.string(),
    transferDetails: z.strictObject({
      transferId: z.string().regex(/^trf_[0-9a-f]{24}$/),
      initiatedAt: z.string().regex(MICRO_ISO),
      status: z.literal('completed'),
      assessmentIds: z.array(z.string()),
    }),
    learnerGroups: z.strictObject({ removed: z.array(groupSchema), added: z.array(groupSchema) }),
    authorizations: z.strictObject({
      revoked: z.array(
        z.strictObject({
          userId: z.number().int(),
          email: z.email(),
          name: z.string(),
          role: z.string(),
          authorizedAt: z.string().regex(MICRO_ISO),
          authorizedById: z.number().int(),
        }),
      ),
    }),
  }),
});

let sim: Simulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function start(options: SimulatorOptions = {}): Promise<Simulator> {
  sim = createSimulator(options);
  await sim.listen();
  return sim;
}

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

async function call(
  path: string,
  token?: string,
  method: 'GET' | 'PATCH' = 'GET',
  extra = {},
): Promise<Reply> {
  if (!sim) throw new Error('no simulator');
  const headers: Record<string, string> = { 'user-agent': UA, accept: 'application/json', ...extra };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (method === 'PATCH') headers['content-type'] = 'application/json';
  const res = await request(`${sim.url}${path}`, { method, headers, body: method === 'PATCH' ? '{}' : null });
  return { status: res.statusCode, headers: res.headers, body: await res.body.json() };
}

const transfer = (id: number | string, token = 'sim-acme-1') =>
  call(`/1/learner/${id}/transfer`, token, 'PATCH');

describe('simulator: list learners', () => {
  it('lists every field of the spec in its format, ordered by id, 100 per page', async () => {
    await start();
    const res = await call('/1/learner?page=3', 'sim-beta-1');
    expect(res.status).toBe(200);
    const body = listSchema.parse(res.body);
    expect(body.pagination).toEqual({
      total: 1000,
      per_page: 100,
      current_page: '3',
      last_page: 10,
      from: 201,
      to: 300,
    });
    expect(body.data.map((l) => l.id)).toEqual(Array.from({ length: 100 }, (_, i) => 201 + i));
    // Learner i belongs to organizations[(i - 1) % 3]: 201 -> gamma, 202 -> acme, 203 -> beta.
    expect(body.data.slice(0, 3).map((l) => l.organizationId)).toEqual([3, 1, 2]);
  });

  it('has users on most learners and inactive ones seldom (seeded, about 10% each)', async () => {
    await start();
    const all = [];
    for (let page = 1; page <= 10; page++)
      all.push(...listSchema.parse((await call(`/1/learner?page=${page}`, 'sim-acme-1')).body).data);
    expect(all).toHaveLength(1000);
    const noUser = all.filter((l) => l.userId === null).length;
    const inactive = all.filter((l) => l.isActive === 0).length;
    expect(noUser).toBeGreaterThan(50);
    expect(noUser).toBeLessThan(150);
    expect(inactive).toBeGreaterThan(50);
    expect(inactive).toBeLessThan(150);
  });

  it('gives the same data for the same seed and other data for another seed', async () => {
    const a = createSimulator({ seed: 7, learners: 5 });
    const b = createSimulator({ seed: 7, learners: 5 });
    const c = createSimulator({ seed: 8, learners: 5 });
    expect(a.learner(3)).toEqual(b.learner(3));
    expect(a.learner(3)).not.toEqual(c.learner(3));
  });

  it('paginates: first page when omitted, a partial last page, an empty page past the end', async () => {
    await start({ learners: 250 });
    const first = listSchema.parse((await call('/1/learner', 'sim-acme-1')).body);
    expect(first.pagination).toMatchObject({ current_page: '1', from: 1, to: 100, last_page: 3, total: 250 });
    const last = listSchema.parse((await call('/1/learner?page=3', 'sim-acme-1')).body);
    expect(last.pagination).toMatchObject({ current_page: '3', from: 201, to: 250, last_page: 3 });
    expect(last.data).toHaveLength(50);
    const past = await call('/1/learner?page=4', 'sim-acme-1');
    expect(past.status).toBe(200);
    expect(listSchema.parse(past.body)).toEqual({
      data: [],
      pagination: { total: 250, per_page: 100, current_page: '4', last_page: 3, from: null, to: null },
    });
  });

  it.each(['0', '-1', 'abc', '1.5', ''])('answers 400 with the error body for page=%j', async (page) => {
    await start({ learners: 10 });
    const res = await call(`/1/learner?page=${page}`, 'sim-acme-1');
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ success: false, error: 'Invalid request' });
    expect(sim?.record.at(-1)).toMatchObject({ status: 400, result: 'bad-request' });
  });

  it('answers 401 without a valid token and 400 without a User-Agent', async () => {
    await start({ learners: 10 });
    const unauthorized = {
      success: false,
      error: 'Unauthorized',
      message: 'Invalid or missing access token',
    };
    expect(await call('/1/learner')).toMatchObject({ status: 401, body: unauthorized });
    expect(await call('/1/learner', 'nope')).toMatchObject({ status: 401, body: unauthorized });
    const res = await request(`${sim?.url}/1/learner`, { headers: { authorization: 'Bearer sim-acme-1' } });
    expect(res.statusCode).toBe(400);
    expect(await res.body.json()).toMatchObject({ success: false, error: 'Invalid request' });
  });
});

describe('simulator: transfer', () => {
  it('returns the full result body and applies every effect of the spec', async () => {
    await start();
    const before = sim?.learner(2); // beta's learner
    expect(before?.organizationId).toBe(2);
    const res = await transfer(2, 'sim-acme-1');
    expect(res.status).toBe(200);
    const body = transferSchema.parse(res.body);
    expect(body.data.learnerId).toBe(2);
    expect(body.data.newOwner).toBe('Acme Learning');
    expect(body.data.transferDetails.assessmentIds).toEqual(before?.assessmentIds);
    expect(body.data.learnerGroups.removed).toEqual(before?.groups);
    expect(body.data.learnerGroups.added).toEqual([expect.objectContaining({ id: 101 })]);
    expect(body.data.authorizations.revoked).toEqual(before?.authorizations);

    const after = sim?.learner(2);
    expect(after?.organizationId).toBe(1);
    expect(after?.groups).toEqual(body.data.learnerGroups.added);
    expect(after?.authorizations).toEqual([]);
    expect(after?.updatedAt).not.toBe(before?.updatedAt);
    expect(sim?.ownerChanges(2)).toBe(1);
    expect(sim?.transfersOf(2)).toEqual([body]);

    // The authorizations are gone: a transfer onwards revokes nothing and removes the acme group.
    const onwards = transferSchema.parse((await transfer(2, 'sim-beta-1')).body);
    expect(onwards.data.authorizations.revoked).toEqual([]);
    expect(onwards.data.learnerGroups.removed).toEqual(body.data.learnerGroups.added);
    expect(onwards.data.transferDetails.transferId).not.toBe(body.data.transferDetails.transferId);
    expect(sim?.ownerChanges(2)).toBe(2);
    expect(sim?.transfersOf(2).map((t) => t.data.newOwner)).toEqual(['Acme Learning', 'Beta Academy']);
  });

  it('accepts an empty body as well as {}', async () => {
    await start({ learners: 10 });
    const res = await request(`${sim?.url}/1/learner/3/transfer`, {
      method: 'PATCH',
      headers: { 'user-agent': UA, authorization: 'Bearer sim-acme-1', 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(200);
    expect(transferSchema.parse(await res.body.json()).data.learnerId).toBe(3);
  });

  it('answers each error of the spec with its body, and 401 for unknown, missing and revoked tokens', async () => {
    await start({ learners: 30, forbiddenLearnerIds: [5], failingLearnerIds: [8] });
    expect(await transfer(2, 'sim-gamma-readonly')).toMatchObject({
      status: 403,
      body: { success: false, error: 'Unauthorized', message: expect.any(String) },
    });
    expect((await transfer(5, 'sim-acme-1')).status).toBe(403);
    expect(await transfer(99999)).toMatchObject({
      status: 404,
      body: { success: false, error: 'Learner not found', message: 'No learner exists with ID 99999' },
    });
    expect(await transfer(8)).toMatchObject({
      status: 500,
      body: { success: false, error: 'Transfer failed', message: expect.any(String) },
    });
    expect((await transfer(8)).status).toBe(500);
    expect(sim?.ownerChanges(8)).toBe(0);
    expect((await transfer(2, 'unknown-token')).status).toBe(401);
    expect((await call('/1/learner/2/transfer', undefined, 'PATCH')).status).toBe(401);
    sim?.revokeToken('sim-acme-2');
    expect(await transfer(2, 'sim-acme-2')).toMatchObject({
      status: 401,
      body: { success: false, error: 'Unauthorized', message: 'Invalid or missing access token' },
    });
    expect(sim?.ownerChanges(2)).toBe(0);
    expect(sim?.ownerChanges(5)).toBe(0);
    expect(sim?.record.map((r) => r.result)).toEqual([
      'forbidden',
      'forbidden',
      'not-found',
      'server-error',
      'server-error',
      'unauthorized',
      'unauthorized',
      'unauthorized',
    ]);
    // The revoked token is still named (by label) in the record; unknown ones are not.
    expect(sim?.record.at(-1)).toMatchObject({ org: 'acme', tokenLabel: 'acme#2', status: 401 });
    expect(sim?.record.at(-2)).toMatchObject({ org: null, tokenLabel: null });
    expect(sim?.record.at(-1)?.countedAt).toBeUndefined();
  });

  it("repeatMode 'error' answers the spec's 400 and changes nothing", async () => {
    await start({ learners: 10 });
    expect((await transfer(2)).status).toBe(200);
    expect(await transfer(2)).toEqual({
      status: 400,
      headers: expect.any(Object),
      body: {
        success: false,
        error: 'Invalid request',
        message: "Learner is already associated with the caller's organization",
      },
    });
    expect(sim?.ownerChanges(2)).toBe(1);
    expect(sim?.record.at(-1)).toMatchObject({ result: 'already-in-org', effectApplied: false });
  });

  it("repeatMode 'success' answers 200 with the same transferId and no new transfer", async () => {
    await start({ learners: 10, repeatMode: 'success' });
    const first = transferSchema.parse((await transfer(2)).body);
    const again = await transfer(2, 'sim-acme-2');
    expect(again.status).toBe(200);
    const body = transferSchema.parse(again.body);
    expect(body.data.transferDetails.transferId).toBe(first.data.transferDetails.transferId);
    expect(body.data.authorizations.revoked).toEqual([]);
    expect(sim?.ownerChanges(2)).toBe(1);
    expect(sim?.transfersOf(2)).toHaveLength(1);
    expect(sim?.record.at(-1)).toMatchObject({ status: 200, result: 'repeat-success', effectApplied: false });

    // Learner 1 was in acme from the start: a fresh-looking body, no effect, and the same id on a repeat.
    const own = transferSchema.parse((await transfer(1)).body);
    const ownAgain = transferSchema.parse((await transfer(1)).body);
    expect(ownAgain.data.transferDetails.transferId).toBe(own.data.transferDetails.transferId);
    expect(sim?.ownerChanges(1)).toBe(0);
    expect(sim?.transfersOf(1)).toEqual([]);
  });

  it("repeatMode 'mixed' gives both answers, reproducibly for a seed, and setRepeatMode switches", async () => {
    const run = async (seed: number): Promise<number[]> => {
      await start({ learners: 10, repeatMode: 'mixed', seed });
      await transfer(2);
      const statuses: number[] = [];
      for (let i = 0; i < 16; i++) statuses.push((await transfer(2)).status);
      await sim?.close();
      sim = undefined;
      return statuses;
    };
    const a = await run(3);
    expect(new Set(a)).toEqual(new Set([200, 400]));
    expect(await run(3)).toEqual(a);

    await start({ learners: 10 });
    await transfer(2);
    sim?.setRepeatMode('success');
    expect((await transfer(2)).status).toBe(200);
    sim?.setRepeatMode('error');
    expect((await transfer(2)).status).toBe(400);
  });

  it('records each request with its token label, never the token, and tells a token org', async () => {
    await start({ learners: 10 });
    await call('/1/learner?page=1', 'sim-acme-2');
    await transfer(2, 'sim-acme-2');
    expect(sim?.record).toEqual([
      expect.objectContaining({
        seq: 1,
        method: 'GET',
        path: '/1/learner',
        page: 1,
        result: 'listed',
        status: 200,
      }),
      expect.objectContaining({
        seq: 2,
        method: 'PATCH',
        path: '/1/learner/2/transfer',
        learnerId: 2,
        org: 'acme',
        tokenLabel: 'acme#2',
        status: 200,
        result: 'transferred',
        effectApplied: true,
      }),
    ]);
    const [list, patch] = sim?.record ?? [];
    expect(list?.countedAt).toBeUndefined(); // listing is not rate limited
    expect(patch?.countedAt).toBeGreaterThanOrEqual(patch?.receivedAt ?? Infinity);
    expect(patch?.respondedAt).toBeGreaterThanOrEqual(patch?.countedAt ?? Infinity);
    expect(JSON.stringify(sim?.record)).not.toContain('sim-acme');
    expect(sim?.tokenOrg('sim-beta-1')).toBe('beta');
    expect(sim?.tokenOrg('nope')).toBeUndefined();
  });

  it('rejects options that cannot make a world', () => {
    expect(() => createSimulator({ tokens: [{ token: 't', org: 'nowhere' }] })).toThrow(
      /unknown organization 'nowhere'/,
    );
    expect(() => createSimulator({ faults: { errorRate: 0.7, resetRate: 0.5 } })).toThrow(
      /must not exceed 1/,
    );
    expect(() =>
      createSimulator({ limits: { window: 'rolling', perToken: { max: 0, windowMs: 1000 } } }),
    ).toThrow(/limits.perToken/);
  });
});
