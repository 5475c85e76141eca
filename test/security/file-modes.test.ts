// Exports hold names and e-mails (revoked authorizations, learners' rows): each is created 0600, with
// a umask that would leave it world-readable, and a file that already existed as 0644 is narrowed too.
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportAudit } from '../../src/outcomes/audit-export.ts';
import { writeReport, writeSplit } from '../../src/outcomes/report.ts';
import { newRunId } from '../../src/outcomes/runs.ts';
import { enqueueCsv } from '../../src/queue/enqueue-csv.ts';
import { runReconcile } from '../../src/queue/reconcile-run.ts';
import { runCli } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;
let umask: number;
beforeAll(async () => {
  // Without the fix every file below would come out 0666.
  umask = process.umask(0);
  h = await startHarness({
    tag: 'sec-modes',
    sim: { learners: 30 },
    env: { LOG_LEVEL: 'warn', LIMIT_PER_TOKEN: '200/2s', LIMIT_PER_ORG: '400/2s' },
  });
  // One real transfer, so the audit export and the report hold what they hold in production.
  await h.enqueueIds([2]);
  await h.workUntilIdle({ concurrency: 1 });
});
afterAll(async () => {
  process.umask(umask);
  await h?.close();
});

const modeOf = (path: string) => statSync(path).mode & 0o777;

describe('exports are created 0600', () => {
  it('report --out (also over an existing 0644 file) and --split', async () => {
    const out = join(h.dir, 'modes', 'report.csv');
    expect(await writeReport(h.ctx.store, { orgs: ['acme'] }, { format: 'csv', out })).toBeGreaterThan(0);
    expect(modeOf(out)).toBe(0o600);
    const existing = join(h.dir, 'existing.csv');
    writeFileSync(existing, 'old', { mode: 0o644 });
    expect(modeOf(existing)).toBe(0o644);
    await writeReport(h.ctx.store, { orgs: ['acme'] }, { format: 'ndjson', out: existing });
    expect(modeOf(existing)).toBe(0o600);
    const split = await writeSplit(h.ctx.store, { orgs: ['acme'] }, join(h.dir, 'split'));
    for (const file of Object.values(split.files)) expect(modeOf(file)).toBe(0o600);
  });

  it('audit --out, through the CLI', async () => {
    const out = join(h.dir, 'audit', 'audit.ndjson');
    expect(await exportAudit(h.ctx.store, { orgs: ['acme'] }, out)).toBe(1);
    expect(modeOf(out)).toBe(0o600);
    const cliOut = join(h.dir, 'audit', 'cli.ndjson');
    const r = await runCli(['audit', '--org', 'acme', '--out', cliOut], { ...h.env });
    expect(r.code).toBe(0);
    expect(modeOf(cliOut)).toBe(0o600);
  });

  it('the rejects file of an enqueue', async () => {
    const file = h.writeFile('with-rejects.csv', 'learnerId\n3\nnot-a-number\n');
    const rejectsFile = join(h.dir, 'rejects', 'rejects.csv');
    const s = await enqueueCsv(
      { producer: h.ctx.producer, runs: h.ctx.runs },
      { file, defaultOrg: 'acme', knownOrgs: ['acme'], runId: newRunId(), rejectsFile },
    );
    expect(s.rejected).toBe(1);
    expect(modeOf(rejectsFile)).toBe(0o600);
  });

  it('the drift report and summary of a reconcile', async () => {
    const file = h.writeFile('desired.csv', 'learnerId,org\n5,acme\n6,acme\n');
    const s = await runReconcile(h.ctx, { file, orgIds: { acme: 1 }, outDir: join(h.dir, 'drift') });
    expect(modeOf(s.driftFile as string)).toBe(0o600);
    expect(modeOf(s.summaryFile as string)).toBe(0o600);
  });
});
