// AUDIT_PERSONAL_RETENTION (issue 47): a cohort runs through the real pipeline against the simulator,
// the clock moves past the retention, and the pass that `work` runs finds no e-mail address or name of the
// simulator's users anywhere in Redis or the archive, while every entry still counts the authorizations
// its transfer revoked (and their roles and user ids). Without AUDIT_ARCHIVE_DIR the setting is refused.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/core/config.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { removeOldPersonalData } from '../../src/ops/audit/retention.ts';
import { BodyArchive, keepOf } from '../../src/worker/body-archive.ts';
import { startHarness, learnersNotIn, type Harness } from '../helpers/pipeline.ts';
import { dumpPrefix } from '../helpers/redis.ts';

const DAY = 86_400_000;
let h: Harness;
let archive: string;
const tmp = mkdtempSync(join(tmpdir(), 'lt-retention-'));
const ids = learnersNotIn('acme', 40);

beforeAll(async () => {
  archive = join(tmp, 'archive');
  h = await startHarness({
    tag: 'retain',
    env: { AUDIT_ARCHIVE_DIR: archive, AUDIT_PERSONAL_RETENTION: '180d' },
  });
  await h.enqueueIds(ids);
  const r = await h.workUntilIdle();
  expect(r.reason).toBe('idle');
});
afterAll(async () => {
  await h?.close();
  rmSync(tmp, { recursive: true, force: true });
});

const revokedOf = (id: number) => h.sim.transfersOf(id).flatMap((t) => t.data.authorizations.revoked);

function archiveLines(): string[] {
  const out: string[] = [];
  for (const org of readdirSync(archive, { withFileTypes: true }).filter((d) => d.isDirectory()))
    for (const f of readdirSync(join(archive, org.name)))
      if (f.endsWith('.ndjson.gz'))
        out.push(
          ...gunzipSync(readFileSync(join(archive, org.name, f)))
            .toString('utf8')
            .split('\n')
            .filter(Boolean),
        );
  return out;
}

describe('AUDIT_PERSONAL_RETENTION', () => {
  it('is refused without AUDIT_ARCHIVE_DIR, saying why', () => {
    const { AUDIT_ARCHIVE_DIR: _, ...env } = h.env;
    expect(() => loadConfig(env)).toThrow(
      /AUDIT_PERSONAL_RETENTION needs AUDIT_ARCHIVE_DIR: entries are archived before/,
    );
    expect(loadConfig(h.env).auditPersonalRetentionMs).toBe(180 * DAY);
  });

  it('within the retention, nothing is removed', async () => {
    const deps = { redis: h.ctx.redis, keys: h.ctx.keys, dir: archive, orgs: ['acme'] };
    const r = await removeOldPersonalData(deps, 180 * DAY, { intervalMs: 1 });
    expect(r).toMatchObject({ kind: 'done', entries: 0 });
    const people = ids.flatMap(revokedOf);
    expect(people.length).toBeGreaterThan(10);
    const lines = archiveLines().join('\n');
    for (const a of people) expect(lines).toContain(a.email);
  });

  it('a kept body (an unreadable answer over 8 KiB) lives as long as the newest answer that carried it, then is deleted', async () => {
    const bodies = new BodyArchive(h.config.spoolDir);
    // Two unreadable 200s that name a person, each over the 8 KiB kept in Redis: whole on disk.
    const big = (who: string) =>
      `{"data":{"authorizations":{"revoked":[{"email":"${who}@example.test","name":"${who}"}]},"pad":"${'x'.repeat(10_000)}"`;
    const [again, once] = [big('met-again'), big('met-once')];
    for (const text of [again, once]) await bodies.keep(keepOf(text), text);
    const pathOf = (text: string) => join(bodies.dir, `${keepOf(text).sha256}.body`);
    // Both first met 200 days ago; one of them answered again now (another learner's attempt).
    const old = (Date.now() - 200 * DAY) / 1000;
    for (const text of [again, once]) utimesSync(pathOf(text), old, old);
    await bodies.keep(keepOf(again), again);
    expect(statSync(pathOf(again)).mtimeMs).toBeGreaterThan(Date.now() - 60_000);

    const deps = { redis: h.ctx.redis, keys: h.ctx.keys, dir: archive, orgs: ['acme'], bodies };
    const r = await removeOldPersonalData(deps, 180 * DAY, { intervalMs: 1 });
    expect(r).toMatchObject({ kind: 'done', entries: 0, bodies: 1 });
    expect(readdirSync(bodies.dir)).toEqual([`${keepOf(again).sha256}.body`]);
    const changes = await readChanges(h.ctx.redis, h.ctx.keys, { action: 'audit.retention' });
    expect(changes[0]?.details).toMatchObject({ why: 'retention 180d', bodies: 1, entries: 0 });
  });

  it('past it, no e-mail address or name anywhere in Redis or the archive; every entry still counts its revoked authorizations', async () => {
    const bodies = new BodyArchive(h.config.spoolDir);
    const deps = { redis: h.ctx.redis, keys: h.ctx.keys, dir: archive, orgs: ['acme'], bodies };
    await new Promise((r) => setTimeout(r, 5));
    const r = await removeOldPersonalData(deps, 180 * DAY, { now: Date.now() + 181 * DAY, intervalMs: 1 });
    expect(r).toMatchObject({ kind: 'done', skipped: [], leftInRedis: 0, bodies: 1 });
    expect(readdirSync(bodies.dir)).toEqual([]);
    const people = ids.flatMap(revokedOf);
    const texts = [...(await dumpPrefix(h.ctx.redis, h.prefix)), ...archiveLines()];
    const all = texts.join('\n');
    for (const a of people) {
      expect(all).not.toContain(a.email);
      expect(all).not.toContain(a.name);
    }
    expect(all).not.toMatch(/@example\.test/);
    // Every transfer's entry: the same authorizations, by user id and role, each with a marker.
    const entries = archiveLines().map((l) => JSON.parse(l) as { fields: Record<string, string> });
    for (const id of ids) {
      const e = entries.find((x) => x.fields.learnerId === String(id) && x.fields.kind === 'transfer');
      const revoked = (
        JSON.parse(e?.fields.raw ?? '{}') as {
          data: { authorizations: { revoked: Record<string, unknown>[] } };
        }
      ).data.authorizations.revoked;
      expect(revoked.map((a) => [a.userId, a.role])).toEqual(revokedOf(id).map((a) => [a.userId, a.role]));
      for (const a of revoked)
        expect(a.removed).toMatchObject({ fields: ['email', 'name'], why: 'retention 180d' });
    }
    const changes = await readChanges(h.ctx.redis, h.ctx.keys, { action: 'audit.retention' });
    expect(changes).toHaveLength(2);
    expect(changes[0]?.details).toMatchObject({
      why: 'retention 180d',
      removed: ['email', 'name'],
      bodies: 1,
    });
  });
});
