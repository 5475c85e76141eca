// The audit archive (docs/audit-archive.md): Redis bytes of the audit after N transfers' entries, with the
// archive off (the stream keeps them all) and on (archived to day files, then trimmed), on a redis-server
// of the bench's own (INFO memory counts nobody else); and the archiver's pace (entries/s, one pass).
// BENCH_AUDIT_ENTRIES (default 100,000) entries of about 1.5 KB, written as finish-attempt.lua writes them.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createKeys } from '../src/core/keys.ts';
import { AuditArchiver } from '../src/ops/audit/archive.ts';
import { OutcomeStore } from '../src/outcomes/store.ts';
import { startOwnRedis } from '../test/helpers/redis-server.ts';
import { isMain, mb, printFigures, round, type Figures } from './common.ts';

const ORG = 'acme';

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
}

/** `n` transfers' audit entries (a result of about 1.5 KB each), 200 at a time. */
async function writeEntries(store: OutcomeStore, n: number): Promise<void> {
  for (let i = 0; i < n; i += 200) {
    await Promise.all(
      Array.from({ length: Math.min(200, n - i) }, (_, j) => {
        const id = i + j + 1;
        return store.finish({
          org: ORG,
          learnerId: id,
          runId: 'bench',
          at: Date.now(),
          attemptId: `a-${id}`,
          update: { b: 'transferred', c: 'transferred', s: 200, x: `T${id}`, d: 5, n: 1, ok: 1 },
          audit: {
            key: `t:T${id}`,
            transferId: `T${id}`,
            // Hex of random bytes: compresses about as badly as text can (real results compress better).
            raw: JSON.stringify({
              success: true,
              data: { learnerId: id, transferId: `T${id}`, pad: randomBytes(650).toString('hex') },
            }),
            kind: 'transfer',
          },
        });
      }),
    );
  }
}

async function measure(n: number, archive: boolean): Promise<Figures> {
  const server = await startOwnRedis();
  const redis = new Redis(server.url, { maxRetriesPerRequest: null });
  const dir = mkdtempSync(join(tmpdir(), 'lt-bench-archive-'));
  try {
    const keys = createKeys('bench');
    const before = await usedMemory(redis);
    await writeEntries(new OutcomeStore(redis, keys), n);
    const f: Figures = {};
    const label = archive ? 'on' : 'off';
    if (archive) {
      const started = performance.now();
      const pass = await new AuditArchiver(redis, keys, { dir }).runOnce();
      const s = (performance.now() - started) / 1000;
      f['archive: entries/s of one pass'] = Math.round(pass.archived / s);
      const files = readdirSync(join(dir, ORG)).map((name) => statSync(join(dir, ORG, name)).size);
      f['archive: file bytes per entry (gzip of random hex)'] = round(
        files.reduce((a, b) => a + b, 0) / n,
        0,
      );
    }
    const stream = Number(await redis.memory('USAGE', keys.audit(ORG), 'SAMPLES', 0).catch(() => 0)) || 0;
    f[`archive ${label}: audit stream bytes`] = stream;
    // Not trimmed by the archive: the dedupe of replayed answers (transfer id -> stream id).
    const ids = Number(await redis.memory('USAGE', keys.auditIds(ORG), 'SAMPLES', 0).catch(() => 0)) || 0;
    f[`archive ${label}: audit dedupe hash bytes`] = ids;
    f[`archive ${label}: Redis MB used by the run`] = mb((await usedMemory(redis)) - before);
    return f;
  } finally {
    await redis.quit();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function runAuditArchiveBench(): Promise<Figures> {
  const n = Number(process.env.BENCH_AUDIT_ENTRIES ?? 100_000);
  return { entries: n, ...(await measure(n, false)), ...(await measure(n, true)) };
}

if (isMain(import.meta.url)) {
  printFigures('audit archive', await runAuditArchiveBench());
}
