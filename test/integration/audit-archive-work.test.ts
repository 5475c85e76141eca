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
    // The transfer's entry and the finished learner's story (its attempts), both from the archive.
    expect(
      out.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { learnerId: number; kind: string })
        .map((l) => [l.learnerId, l.kind]),
    ).toEqual([
      [2, 'transfer'],
      [2, 'record'],
    ]);

    // The dashboard of a host with the archive: the learner's story (attempts, audit ids) and its transfer's
    // entry are both read back from the day file.
    const withArchive = { ...h.ctx, config: { ...h.ctx.config, auditArchiveDir: archive } };
    let app = await buildDashboard(withArchive, { bullBoard: false });
    try {
      const page = await authed(app, { url: '/learners/acme/2' });
      expect(page.statusCode).toBe(200);
      expect(page.body).toContain(`read from ${join(archive, 'acme', files[0] ?? '')}`);
      const api = (await authed(app, { url: '/api/learners/acme/2' })).json();
      expect(api.storyArchived).toBe(false);
      expect(api.learner.history.map((a: { outcome: string }) => a.outcome)).toEqual(['transferred']);
      expect(api.audit.map((a: { kind: string }) => a.kind)).toEqual(['transfer']);
      expect(api.auditMissing).toEqual([]);
    } finally {
      await app.close();
    }
    // And of a host without it: the page says where to find what Redis no longer holds.
    app = await buildDashboard(h.ctx, { bullBoard: false });
    try {
      const page = await authed(app, { url: '/learners/acme/2' });
      expect(page.statusCode).toBe(200);
      expect(page.body).toContain(
        'attempts and audit ids are archived (trimmed from Redis) and not in the archive this dashboard reads',
      );
      const api = (await authed(app, { url: '/api/learners/acme/2' })).json();
      expect(api.storyArchived).toBe(true);
      expect(api.learner.state).toBe('transferred');
    } finally {
      await app.close();
    }
  });
});
