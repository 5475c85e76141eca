// When Redis refuses a write because the node became a read-only replica (a failover), and when the
// workers are killed while it refuses. The run and the checks every refusal must pass are
// refusal-run.ts's (redis-refusal.test.ts has the other refusals): a SIGKILL while Redis refuses leaves
// the responses in the spool for the next `work`.
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { atStake, expectAtStake, type AtStake } from '../helpers/at-stake.ts';
import type { RequestRecord } from '../../src/simulator/index.ts';
import { waitFor, waitUntil } from '../helpers/wait.ts';
import {
  closeAfterTests,
  figures,
  holdCallsInFlight,
  infoField,
  ownRedis,
  patches,
  refusalRun,
  spooled,
  startRun,
  usedMemory,
} from './refusal-run.ts';

closeAfterTests();

describe('Redis refuses writes mid-run: a read-only replica, a SIGKILL', () => {
  it('READONLY: REPLICAOF turns the node into a read-only replica (of a copy of itself), then back', async () => {
    // The first full sync is diskless and waits repl-diskless-sync-delay (5 s) for more replicas: no wait.
    const node = await ownRedis(['--repl-diskless-sync-delay', '0']);
    const copy = await ownRedis([
      '--replicaof',
      '127.0.0.1',
      String(node.port),
      '--repl-diskless-sync-delay',
      '0',
    ]);
    const copyAdmin = new Redis(copy.url, { maxRetriesPerRequest: null });
    copyAdmin.on('error', () => {});
    try {
      // The copy must hold the node's data before the run: a node that turns replica of an empty copy
      // loses everything in the full resync.
      await waitUntil(
        'the copy to sync',
        async () => infoField(await copyAdmin.info('replication'), 'master_link_status') === 'up',
      );
      await refusalRun(
        node,
        'ref-ro',
        async (admin, refused) => {
          // No write may fall between the copy's promotion and the node's demotion: hold client writes
          // (scripts included; the node's replication offset stands still), let the copy catch up to that
          // offset, swap roles, let the writes go on. The node then continues from the copy by a partial
          // resync (the copy keeps the node's history as its replid2) and keeps all its data.
          // The workers' writes stop here: what is in flight now is what the refusal meets.
          refused();
          await admin.call('CLIENT', 'PAUSE', '10000', 'WRITE');
          try {
            const offset = Number(infoField(await admin.info('replication'), 'master_repl_offset'));
            await waitUntil('the copy to catch up', async () => {
              const info = await copyAdmin.info('replication');
              return (
                infoField(info, 'master_link_status') === 'up' &&
                Number(infoField(info, 'master_repl_offset')) === offset
              );
            });
            const keys = await admin.dbsize();
            expect(await copyAdmin.dbsize(), 'keys of the copy before the swap').toBe(keys);
            const partial = Number(infoField(await copyAdmin.info('stats'), 'sync_partial_ok'));
            await copyAdmin.call('REPLICAOF', 'NO', 'ONE');
            await admin.call('REPLICAOF', '127.0.0.1', String(copy.port));
            await waitUntil(
              'the node to follow the copy',
              async () => infoField(await admin.info('replication'), 'master_link_status') === 'up',
            );
            expect(
              Number(infoField(await copyAdmin.info('stats'), 'sync_partial_ok')),
              'a partial resync (a full one would replace the data)',
            ).toBe(partial + 1);
          } finally {
            await admin.call('CLIENT', 'UNPAUSE');
          }
          await expect(admin.set('probe', 'x')).rejects.toThrow(/READONLY/);
        },
        async (admin) => {
          await admin.call('REPLICAOF', 'NO', 'ONE');
        },
      );
    } finally {
      copyAdmin.disconnect();
    }
  }, 240_000);

  it('SIGKILL while Redis refuses writes: the responses wait in the spool, the next work records them', async () => {
    const redis = await ownRedis(['--maxmemory-policy', 'noeviction']);
    const { harness, ids } = await startRun(redis.url, 'ref-kill');
    const admin = new Redis(redis.url);
    const workers = [0, 1].map(() => spawnCli(['work', '--concurrency', '5'], harness.env));
    const release = await holdCallsInFlight(harness, 30);
    let stake: AtStake;
    let caught: RequestRecord[];
    let count: number;
    try {
      const limit = String(Math.max(1_048_576, Math.floor((await usedMemory(admin)) * 0.8)));
      stake = atStake(harness.sim, ids, 'the refusal before the SIGKILL');
      caught = patches(harness).filter((r) => r.status === 0);
      count = patches(harness).length;
      await admin.config('SET', 'maxmemory', limit);
    } finally {
      release();
    }
    expectAtStake(stake);
    // Let the calls in flight be answered and their 200s reach the spool (the record cannot be written),
    // then kill both workers. A call admitted just before the refusal may go out just after it (its permit
    // was written; no permit can be granted under the refusal, since acquiring writes): wait until every
    // call is answered and none has started for 2 s, or a call cut by the kill would be sent again.
    const inFlight = new Set(caught);
    let quietSince = Date.now();
    await waitUntil('every call answered, and none new for 2 s', () => {
      const all = patches(harness);
      if (all.length !== count || all.some((r) => r.status === 0)) {
        for (const r of all.slice(count)) inFlight.add(r);
        count = all.length;
        quietSince = Date.now();
        return false;
      }
      return Date.now() - quietSince >= 2000;
    });
    const answered200 = [...inFlight].filter((r) => r.status === 200).map((r) => r.learnerId);
    await waitFor(
      `the 200s of learners ${answered200.join(', ')} in the spool`,
      () => spooled(harness.env.SPOOL_DIR as string),
      (text) => answered200.every((id) => text.includes(`"learnerId":${id},`)),
      { show: (text) => `${text.split('\n').length - 1} spool lines` },
    );
    const answeredUnrecorded = patches(harness).length;
    // Listen for both exits before killing: an exit heard late is never heard.
    const exits = workers.map((w) => waitExit(w));
    for (const w of workers) w.kill('SIGKILL');
    for (const r of await Promise.all(exits)) expect(r.signal).toBe('SIGKILL');
    await admin.config('SET', 'maxmemory', '0');
    admin.disconnect();
    const last = await runCommand(['work', '--until-idle', '--concurrency', '5'], harness.env, 150_000);
    expect(last.code, last.stderr.slice(-3000)).toBe(0);
    expect(last.stderr).toMatch(/replayed [1-9]\d* responses from [12] spool files/);
    // The run was under way when Redis refused (the gate may close before any further call goes out).
    expect(answeredUnrecorded).toBeGreaterThanOrEqual(30);
    const f = await figures(harness, ids, 0, 0);
    expect(f.calledTwice).toBe(0);
    for (const id of ids)
      expect((await harness.ctx.store.get('acme', id))?.pr, `learner ${id}`).toBeUndefined();
  }, 240_000);
});
