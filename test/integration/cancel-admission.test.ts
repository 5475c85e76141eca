// The worker's half of cancel (worker/admission.ts), on the processor alone with a job taken as a BullMQ
// worker takes it (active, locked): a cancel that comes while the job is in the worker's hands cannot
// remove it, and the worker ends it with no call, giving back the permit, the lease and the claim; a
// cancel that lands between the worker's first read and its lease is caught by the read under the lease.
import { randomUUID } from 'node:crypto';
import { Worker, type Job } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { cancelLearners } from '../../src/ops/actions/cancel.ts';
import type { OutcomeStore } from '../../src/outcomes/store.ts';
import type { TransferJob } from '../../src/queue/job.ts';
import { createProcessor } from '../../src/worker/processor.ts';
import { Recorder } from '../../src/worker/recorder.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness | undefined;
let worker: Worker<TransferJob> | undefined;
afterEach(async () => {
  await worker?.close();
  worker = undefined;
  await h?.close();
  h = undefined;
});

const WHO = 'dashboard:ops@10.0.0.1';

function processorFor(harness: Harness, store: OutcomeStore = harness.ctx.store) {
  const { ctx } = harness;
  if (!ctx.client) throw new Error('the harness has no API client');
  const replicated = (org: string) => ctx.durability.replicated(ctx.keys.outcomes(org));
  return createProcessor({
    config: harness.config,
    client: ctx.client,
    budget: ctx.budget,
    store,
    claims: ctx.claims,
    keys: ctx.keys,
    queues: ctx.queues,
    recorder: new Recorder({ store: ctx.store, logger: ctx.logger, replicated }),
    replicated,
    logger: ctx.logger,
  });
}

async function takeJob(harness: Harness, id: number): Promise<{ job: Job<TransferJob>; token: string }> {
  await harness.enqueueIds([id]);
  worker = new Worker<TransferJob>(harness.ctx.keys.queueName('acme'), null, {
    connection: harness.ctx.redis,
    prefix: harness.ctx.keys.prefix,
    autorun: false,
  });
  const token = `lock-${randomUUID()}`;
  const job = (await worker.getNextJob(token, { block: false })) as Job<TransferJob> | undefined;
  if (!job) throw new Error(`no job for learner ${id}`);
  return { job, token };
}

async function expectNoCall(harness: Harness, id: number): Promise<void> {
  const { redis, keys, store, claims } = harness.ctx;
  expect(harness.sim.record.filter((r) => r.method === 'PATCH' && r.learnerId === id)).toEqual([]);
  expect(await redis.hget(keys.lease('acme'), String(id)), 'lease').toBeNull();
  expect(await redis.zcard(keys.orgInflight('acme')), 'permits in flight').toBe(0);
  expect((await store.get('acme', id))?.b).toBe('cancelled');
  expect(await claims.holders([id])).toEqual([undefined]);
}

describe('a cancelled learner in a worker', () => {
  it('whose job the worker holds: cancel cannot remove it, and the worker ends it with no call', async () => {
    h = await startHarness({ tag: 'cancel-adm' });
    const [id] = learnersNotIn('acme', 1) as [number];
    const { job, token } = await takeJob(h, id);
    const s = await cancelLearners(h.ctx, { orgs: ['acme'], learnerIds: [id] }, WHO);
    expect(s).toMatchObject({ cancelled: 1, jobsLeftToWorkers: 1, inFlight: [] });
    expect(await job.getState()).toBe('active');
    const result = await processorFor(h)(job, token);
    expect(result).toEqual({ code: 'cancelled', transferId: null });
    await expectNoCall(h, id);
  });

  it('cancelled after its first read, before its lease: the read under the lease sees it', async () => {
    h = await startHarness({ tag: 'cancel-adm' });
    const [id] = learnersNotIn('acme', 1) as [number];
    const { job, token } = await takeJob(h, id);
    const harness = h;
    // The cancel lands right after admit's first read (no lease yet): interleaved, not faked.
    let reads = 0;
    const store = new Proxy(harness.ctx.store, {
      get(target, prop, receiver) {
        if (prop !== 'get') return Reflect.get(target, prop, receiver) as unknown;
        return async (org: string, learnerId: number) => {
          const record = await target.get(org, learnerId);
          if (learnerId === id && reads++ === 0) {
            const s = await cancelLearners(harness.ctx, { orgs: ['acme'], learnerIds: [id] }, WHO);
            expect(s.cancelled).toBe(1);
          }
          return record;
        };
      },
    });
    const result = await processorFor(harness, store)(job, token);
    expect(reads).toBe(2);
    expect(result).toEqual({ code: 'cancelled', transferId: null });
    await expectNoCall(harness, id);
    expect(harness.logLines.some((l) => l.includes('learner found cancelled under its lease: no call'))).toBe(
      true,
    );
  });
});
