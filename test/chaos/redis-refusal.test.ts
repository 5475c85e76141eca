// When Redis refuses a write: mid-run, on a redis-server of the test's own, Redis runs out of memory,
// fails its snapshots, or lacks replicas, and then recovers. Each run must: send no call it could not
// record (no learner called twice), lose no response (every revoked authorization in the audit), record
// every learner the tool moved as `transferred`, say so in a handful of log lines, and finish by itself.
// The read-only replica and the SIGKILL under a refusal are redis-refusal-replica.test.ts's; the run and
// its checks are refusal-run.ts's.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.ts';
import { closeAfterTests, ownRedis, refusalRun, usedMemory } from './refusal-run.ts';

closeAfterTests();

describe('Redis refuses writes mid-run', () => {
  it('out of memory (OOM) for 6 s, then raised: nothing lost, nobody called twice, a few log lines', async () => {
    const redis = await ownRedis(['--maxmemory-policy', 'noeviction']);
    await refusalRun(
      redis,
      'ref-oom',
      async (admin, refused) => {
        const used = await usedMemory(admin);
        refused();
        await admin.config('SET', 'maxmemory', String(Math.max(1_048_576, Math.floor(used * 0.8))));
        // The limit took: a write is refused.
        await expect(admin.set('probe', 'x')).rejects.toThrow(/OOM/);
      },
      async (admin) => {
        await admin.config('SET', 'maxmemory', '0');
      },
    );
  }, 240_000);

  it('MISCONF (snapshots failing) for 6 s, then fixed', async () => {
    // Redis refuses writes with MISCONF only when the last BGSAVE failed *and* it has save points:
    // startOwnRedis turns them off (`--save ""`), so give it one that never fires within the test.
    const redis = await ownRedis([
      '--stop-writes-on-bgsave-error',
      'yes',
      '--enable-protected-configs',
      'yes',
      '--save',
      '3600 1',
    ]);
    const gone = mkdtempSync(join(tmpdir(), 'lt-misconf-'));
    // A save or an AOF rewrite in progress would refuse the BGSAVE: wait for them.
    const persistence = async (admin: Redis) => admin.info('persistence');
    const idle = (admin: Redis) =>
      waitFor(
        'no save or AOF rewrite in progress',
        () => persistence(admin),
        (info) => !/(rdb_bgsave_in_progress|aof_rewrite_in_progress):1/.test(info),
        { timeoutMs: 10_000 },
      );
    await refusalRun(
      redis,
      'ref-misconf',
      async (admin, refused) => {
        await idle(admin);
        await admin.bgsave();
        // Writes are refused from the moment the save has failed.
        await waitFor(
          'the BGSAVE into a deleted directory to fail',
          () => persistence(admin),
          (info) => /rdb_last_bgsave_status:err/.test(info),
          { timeoutMs: 10_000, everyMs: 5 },
        );
        refused();
        await expect(admin.set('probe', 'x')).rejects.toThrow(/MISCONF/);
      },
      async (admin) => {
        await admin.config('SET', 'dir', redis.dir);
        await idle(admin);
        await admin.bgsave();
        await waitFor(
          'a BGSAVE to succeed again',
          () => persistence(admin),
          (info) => /rdb_last_bgsave_status:ok/.test(info),
          { timeoutMs: 10_000 },
        );
      },
      {
        // Nothing is refused until a save fails (the save point never fires within the test).
        prepare: async (admin) => {
          await admin.config('SET', 'dir', gone);
          rmSync(gone, { recursive: true, force: true });
        },
      },
    );
  }, 240_000);

  it('NOREPLICAS (min-replicas-to-write unmet) for 6 s, then lifted', async () => {
    const redis = await ownRedis();
    await refusalRun(
      redis,
      'ref-norepl',
      async (admin, refused) => {
        refused();
        await admin.config('SET', 'min-replicas-to-write', '1');
        await expect(admin.set('probe', 'x')).rejects.toThrow(/NOREPLICAS/);
      },
      async (admin) => {
        await admin.config('SET', 'min-replicas-to-write', '0');
      },
    );
  }, 240_000);
});
