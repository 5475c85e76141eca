// The personal-data retention pass (AUDIT_PERSONAL_RETENTION, docs/personal-data.md): its cost per
// 100,000 archived entries, every one past the retention (the first pass after the retention is set),
// then again when nothing is left to remove (every later pass: read only). BENCH_RETENTION_ENTRIES
// (default 100,000) transfer entries, two revoked authorizations each, over 10 day files; a redis-server of
// the bench's own for the turn and the lease.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createKeys } from '../src/core/keys.ts';
import { appendMember, archiveLine, dayFile, dayOfMs } from '../src/ops/audit/archive-file.ts';
import { removeOldPersonalData } from '../src/ops/audit/retention.ts';
import { startOwnRedis } from '../test/helpers/redis-server.ts';
import { isMain, printFigures, round, type Figures } from './common.ts';

const ORG = 'acme';
const DAY = 86_400_000;

function raw(id: number): string {
  const auth = (k: number) => ({
    userId: 200_000 + id * 2 + k,
    email: `teacher.${id}.${k}@example.test`,
    name: `Teacher ${id} ${k}`,
    role: k ? 'parent' : 'teacher',
    authorizedAt: '2026-01-01T00:00:00.000000Z',
    authorizedById: 1000 + k,
  });
  return JSON.stringify({
    success: true,
    message: 'Learner transferred',
    data: {
      learnerId: id,
      newOwner: 'Acme',
      transferDetails: {
        transferId: `t-${id}`,
        initiatedAt: '2026-01-01T00:00:00.000000Z',
        status: 'completed',
        assessmentIds: ['a1', 'a2'],
      },
      learnerGroups: {
        removed: [{ id: 1, name: 'Old', description: '' }],
        added: [{ id: 2, name: 'New', description: '' }],
      },
      authorizations: { revoked: [auth(0), auth(1)] },
    },
  });
}

/** `n` entries over 10 days, appended as the archiver appends them (a member per 1,000). */
async function writeArchive(dir: string, n: number, start: number): Promise<void> {
  const perDay = Math.ceil(n / 10);
  for (let i = 0; i < n; i += 1000) {
    const lines: string[] = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) {
      const t = start + Math.floor(j / perDay) * DAY + (j % perDay);
      lines.push(
        archiveLine(ORG, {
          id: `${t}-0`,
          fields: { learnerId: String(j), runId: 'r', transferId: `t-${j}`, kind: 'transfer', raw: raw(j) },
        }),
      );
    }
    const first = Number(lines[0]?.slice(lines[0].indexOf('"auditId":"') + 11).split('-')[0]);
    await appendMember(dayFile(dir, ORG, dayOfMs(first)), lines.join(''));
  }
}

export async function runPersonalRetentionBench(): Promise<Figures> {
  const n = Number(process.env.BENCH_RETENTION_ENTRIES ?? 100_000);
  const server = await startOwnRedis();
  const redis = new Redis(server.url, { maxRetriesPerRequest: null });
  const dir = mkdtempSync(join(tmpdir(), 'lt-bench-retention-'));
  try {
    const keys = createKeys('bench');
    const start = Date.parse('2026-01-01T00:00:00Z');
    await writeArchive(dir, n, start);
    const deps = { redis, keys, dir, orgs: [ORG] };
    const now = start + 400 * DAY;
    const f: Figures = { entries: n };
    let t = performance.now();
    const first = await removeOldPersonalData(deps, 180 * DAY, { now, intervalMs: 1 });
    const s1 = (performance.now() - t) / 1000;
    await new Promise((r) => setTimeout(r, 5));
    t = performance.now();
    await removeOldPersonalData(deps, 180 * DAY, { now, intervalMs: 1 });
    const s2 = (performance.now() - t) / 1000;
    f['entries changed by the first pass'] = first.kind === 'done' ? first.entries : 0;
    f['first pass (rewrites): s per 100,000 entries'] = round((s1 * 100_000) / n, 2);
    f['later pass (reads only): s per 100,000 entries'] = round((s2 * 100_000) / n, 2);
    return f;
  } finally {
    await redis.quit();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) {
  printFigures('personal-data retention', await runPersonalRetentionBench());
}
