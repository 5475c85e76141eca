// The transfer processor on its own (createProcessor, built as run-workers.ts builds it), with the real
// Redis, the real limiter and the real simulator: the branches a whole run rarely takes, each asserted on
// what BullMQ is told (the thrown error), the learner's record, the permit and the learner's lease.
// A job is taken the way a BullMQ worker takes it (getNextJob with a lock token), so the lock is real.
import { randomUUID } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UnrecoverableError, Worker, type Job } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/core/config.ts';
import { LearnerTransferError } from '../../src/core/errors.ts';
import type { TransferJob } from '../../src/queue/job.ts';
import { createProcessor } from '../../src/worker/processor.ts';
import { Recorder } from '../../src/worker/recorder.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness | undefined;
let worker: Worker<TransferJob> | undefined;
let proxy: Server | undefined;
afterEach(async () => {
  await worker?.close();
  worker = undefined;
  await h?.close();
  h = undefined;
  await new Promise<void>((resolve) => (proxy ? proxy.close(() => resolve()) : resolve()));
  proxy = undefined;
});

/** The processor's deps as run-workers.ts builds them from the context (no spool, no write gate). */
function processorFor(harness: Harness, config: Readonly<Config> = harness.config) {
  const { ctx } = harness;
  if (!ctx.client) throw new Error('the harness has no API client');
  const replicated = (org: string) => ctx.durability.replicated(ctx.keys.outcomes(org));
  return createProcessor({
    config,
    client: ctx.client,
    budget: ctx.budget,
    store: ctx.store,
    claims: ctx.claims,
    keys: ctx.keys,
    queues: ctx.queues,
    recorder: new Recorder({ store: ctx.store, logger: ctx.logger, replicated }),
    replicated,
    logger: ctx.logger,
  });
}

/** Enqueues one learner of acme and takes its job as a BullMQ worker does: active, locked by `token`. */
async function takeJob(harness: Harness): Promise<{ job: Job<TransferJob>; token: string; id: number }> {
  const [id] = learnersNotIn('acme', 1);
  if (id === undefined) throw new Error('no learner');
  await harness.enqueueIds([id]);
  worker = new Worker<TransferJob>(harness.ctx.keys.queueName('acme'), null, {
    connection: harness.ctx.redis,
    prefix: harness.ctx.keys.prefix,
    autorun: false,
  });
  const token = `lock-${randomUUID()}`;
  const job = (await worker.getNextJob(token, { block: false })) as Job<TransferJob> | undefined;
  if (!job) throw new Error(`no job for learner ${id} in acme's queue`);
  expect(job.data.learnerId).toBe(id);
  return { job, token, id };
}

/** Nothing of the attempt is left held: no lease for the learner, no permit in flight. */
async function expectNothingHeld(harness: Harness, id: number): Promise<void> {
  const { redis, keys } = harness.ctx;
  expect(await redis.hget(keys.lease('acme'), String(id)), `lease of learner ${id}`).toBeNull();
  expect(await redis.zcard(keys.orgInflight('acme')), 'permits in flight').toBe(0);
}

function patchesOf(harness: Harness, id: number) {
  return harness.sim.record.filter((r) => r.method === 'PATCH' && r.learnerId === id);
}

describe('createProcessor', () => {
  it('a job whose BullMQ lock is no longer its own sends nothing and ends the attempt', async () => {
    h = await startHarness({ tag: 'proc' });
    const { job, token, id } = await takeJob(h);
    const before = await h.ctx.store.get('acme', id);
    // The stalled check gave the job to another worker: the lock now holds that worker's token.
    await h.ctx.redis.set(h.ctx.keys.jobLock('acme', String(job.id)), 'another-worker', 'PX', 30_000);

    const err = await processorFor(h)(job, token).then(
      () => undefined,
      (e: unknown) => e,
    );
    // BullMQ is told the attempt failed (a retryable error, not a result and not a delay).
    expect(err).toBeInstanceOf(LearnerTransferError);
    expect(err).toMatchObject({ code: 'LT_ATTEMPT_FAILED' });
    expect((err as Error).message).toBe(`job ${job.id} lost its lock before the call: nothing was sent`);
    expect(patchesOf(h, id)).toEqual([]);
    // No permit was granted: nothing in flight, nothing counted, no lease; the record is as it was.
    await expectNothingHeld(h, id);
    expect(await h.ctx.redis.zcard(h.ctx.keys.orgLog('acme'))).toBe(0);
    expect(await h.ctx.store.get('acme', id)).toEqual(before);
    expect(h.logLines.join('')).toContain('job lock lost before sending');
  });

  it('a job of an organization this process has no token for goes back to its queue, untouched', async () => {
    h = await startHarness({ tag: 'proc' });
    const { job, token, id } = await takeJob(h);
    const before = await h.ctx.store.get('acme', id);
    // The process was restarted with acme's tokens taken out of LEARNER_API_TOKENS.
    const config = loadConfig(
      { ...h.env, LEARNER_API_TOKENS: 'beta:sim-beta-1' },
      { requireBaseUrl: true, requireTokens: true },
    );

    const err = await processorFor(h, config)(job, token).then(
      () => undefined,
      (e: unknown) => e,
    );
    // BullMQ is told to rate-limit the queue (no attempt used) and the queue waits a minute for a
    // process that has a token.
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe(Worker.RateLimitError().message);
    const ttl = await h.ctx.queues.get('acme').getRateLimitTtl();
    expect(ttl).toBeGreaterThan(50_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    expect(patchesOf(h, id)).toEqual([]);
    await expectNothingHeld(h, id);
    expect(await h.ctx.redis.zcard(h.ctx.keys.orgLog('acme'))).toBe(0);
    expect(await h.ctx.store.get('acme', id)).toEqual(before);
  });

  it("a 200 that is not the learner's completed transfer fails for good, recorded, permit counted, lease freed", async () => {
    // The real simulator answers; a proxy in front of it turns its 'completed' into 'pending', as a
    // service whose transfer did not finish would answer.
    h = await startHarness({ tag: 'proc', baseUrl: (simUrl) => startPendingProxy(simUrl) });
    const { job, token, id } = await takeJob(h);

    const err = await processorFor(h)(job, token).then(
      () => undefined,
      (e: unknown) => e,
    );
    // BullMQ is told to fail the job for good: a retry cannot make a wrong answer right.
    expect(err).toBeInstanceOf(UnrecoverableError);
    expect((err as Error).message).toBe("unexpected-result 200 (transfer status 'pending', not 'completed')");
    expect(patchesOf(h, id).map((r) => r.status)).toEqual([200]);
    const rec = (await h.ctx.store.getWithStory('acme', id))?.record;
    expect(rec).toMatchObject({ b: 'unexpected-result', c: 'unexpected-result', s: 200 });
    expect(rec?.m).toBe("transfer status 'pending', not 'completed'");
    // Not this learner's transfer: no transfer id kept as its own, the body kept in the audit stream.
    expect(rec?.x).toBeUndefined();
    const audit = await h.ctx.store.auditEntries('acme', rec?.au ?? []);
    expect(audit).toHaveLength(1);
    expect(audit[0]?.learnerId).toBe(id);
    // The call was answered: its permit is counted in the log (not released), and nothing is held.
    await expectNothingHeld(h, id);
    expect(await h.ctx.redis.zcard(h.ctx.keys.orgLog('acme'))).toBe(1);
  });
});

/** An HTTP proxy to the simulator that rewrites a 200's transfer status 'completed' to 'pending'. */
async function startPendingProxy(simUrl: string): Promise<string> {
  const target = new URL(simUrl);
  proxy = createServer((req, res) => {
    const up = request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          let body = Buffer.concat(chunks).toString('utf8');
          if (answer.statusCode === 200) body = body.replace('"status":"completed"', '"status":"pending"');
          const headers = { ...answer.headers, 'content-length': String(Buffer.byteLength(body)) };
          res.writeHead(answer.statusCode ?? 502, headers);
          res.end(body);
        });
      },
    );
    req.pipe(up);
  });
  await new Promise<void>((resolve) => proxy?.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
}
