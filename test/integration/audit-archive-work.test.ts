// AUDIT_ARCHIVE_DIR in a real `work` run (real simulator, real Redis): the process archives and trims the
// audit at its stop, and the learner page still shows each transfer's audit, read from the archive, with
// where it is (a record's `au` ids point to trimmed entries).
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { authed, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { runCommand } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
let archive: string;
beforeAll(async () => {
  h = await startHarness({ tag: 'arcwork', sim: { learners: 20 }, env: { DASHBOARD_TOKEN } });
  archive = join(h.dir, 'audit');
  h.env.AUDIT_ARCHIVE_DIR = archive;
  h.env.LOG_LEVEL = 'warn';
});
afterAll(async () => {
  await h?.close();
});

describe('work with AUDIT_ARCHIVE_DIR', () => {
  it('archives and trims the audit at its stop; the learner page reads the entry from the archive', async () => {
    await h.enqueueIds([2, 3]);
    const work = await runCommand(['work', '--until-idle'], h.env, 60_000);
    expect(work.code, work.stderr).toBe(0);
    expect(await h.ctx.redis.xlen(h.ctx.keys.audit('acme'))).toBe(0);
    const files = readdirSync(join(archive, 'acme'));
    expect(files).toEqual([`audit-${new Date().toISOString().slice(0, 10)}.ndjson.gz`]);

    const out = await runCommand(['audit', '--archive', archive, '--learner', '2'], h.env);
    expect(out.code).toBe(0);
    expect(
      out.stdout
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { learnerId: number }).learnerId),
    ).toEqual([2]);

    // The dashboard of a host with the archive, and of one without it.
    const withArchive = { ...h.ctx, config: { ...h.ctx.config, auditArchiveDir: archive } };
    for (const [ctx, shows] of [
      [withArchive, `read from ${join(archive, 'acme', files[0] ?? '')}`],
      [h.ctx, 'is archived (trimmed from Redis) and not in the archive this dashboard reads'],
    ] as const) {
      const app = await buildDashboard(ctx, { bullBoard: false });
      try {
        const page = await authed(app, { url: '/learners/acme/2' });
        expect(page.statusCode).toBe(200);
        expect(page.body).toContain(shows);
        const api = (await authed(app, { url: '/api/learners/acme/2' })).json();
        expect(api.audit.length + api.auditMissing.length).toBe(1);
      } finally {
        await app.close();
      }
    }
  });
});
