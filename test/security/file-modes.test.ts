// Exports hold names and e-mails (revoked authorizations, learners' rows): each is created 0600, with
// a umask that would leave it world-readable, and a file that already existed as 0644 is narrowed too.
// None is written through a symbolic link planted at its path (the command refuses, naming the path,
// and the link's target is untouched), and a failed export leaves no partial file.
import {
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportAudit } from '../../src/ops/audit/export.ts';
import { writeReport, writeSplit } from '../../src/ops/views/report.ts';
import { newRunId } from '../../src/outcomes/runs.ts';
import { enqueueCsv } from '../../src/queue/enqueue-csv.ts';
import { runReconcile } from '../../src/ops/intake/reconcile.ts';
import { runCommand, withoutNoPersistenceWarning } from '../helpers/cli.ts';
import type { OutcomeStore } from '../../src/outcomes/store.ts';
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
    // The transfer's answer and the story entry of its learner's compacted record.
    expect(await exportAudit(h.ctx.store, { orgs: ['acme'] }, out)).toBe(2);
    expect(modeOf(out)).toBe(0o600);
    const cliOut = join(h.dir, 'audit', 'cli.ndjson');
    const r = await runCommand(['audit', '--org', 'acme', '--out', cliOut], { ...h.env });
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

/**
 * A file of someone else's (0644, with content) and, in a fresh directory, a symbolic link to it at
 * `name`: what an attacker plants where an export is about to be written.
 */
function plant(name: string): { dir: string; link: string; victim: string; untouched(): void } {
  const dir = join(h.dir, `planted-${Math.random().toString(36).slice(2, 8)}`);
  mkdirSync(dir, { recursive: true });
  const victim = join(h.dir, `victim-${Math.random().toString(36).slice(2, 8)}.txt`);
  writeFileSync(victim, 'precious\n', { mode: 0o644 });
  const link = join(dir, name);
  symlinkSync(victim, link);
  return {
    dir,
    link,
    victim,
    untouched() {
      expect(readFileSync(victim, 'utf8')).toBe('precious\n');
      expect(modeOf(victim)).toBe(0o644);
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      // Nothing else was left beside the link: no temporary file, no other export.
      expect(readdirSync(dir)).toEqual([name]);
    },
  };
}

describe('exports never follow a link', () => {
  const env = () => ({ ...h.env, LOG_LEVEL: 'warn' });
  const refusal = (stderr: string, path: string) => {
    expect(withoutNoPersistenceWarning(stderr)).toContain(
      `learner-transfer: ${path} is a symbolic link: refusing to write through it`,
    );
  };

  it("report --out: refuses (exit 2, the path named), the link's target untouched", async () => {
    const p = plant('report.csv');
    const r = await runCommand(['report', '--org', 'acme', '--out', p.link], env());
    expect(r.code).toBe(2);
    refusal(r.stderr, p.link);
    p.untouched();
    await expect(
      writeReport(h.ctx.store, { orgs: ['acme'] }, { format: 'ndjson', out: p.link }),
    ).rejects.toMatchObject({ code: 'LT_OUTPUT_UNSAFE' });
    p.untouched();
  });

  it('report --split: a link at any of its four files refuses the split, and no file is written', async () => {
    for (const name of ['successes.csv', 'failures.csv', 'pending.csv', 'cancelled.csv']) {
      const p = plant(name);
      const r = await runCommand(['report', '--org', 'acme', '--split', p.dir], env());
      expect(r.code, name).toBe(2);
      refusal(r.stderr, p.link);
      p.untouched();
    }
  });

  it("audit --out: refuses (exit 2, the path named), the link's target untouched", async () => {
    const p = plant('audit.ndjson');
    const r = await runCommand(['audit', '--org', 'acme', '--out', p.link], env());
    expect(r.code).toBe(2);
    refusal(r.stderr, p.link);
    p.untouched();
  });

  it('the rejects file of enqueue: refused before anything is enqueued', async () => {
    const p = plant('rejects.csv');
    const csv = h.writeFile('rejects-link.csv', 'learnerId\n4\nnot-a-number\n');
    const r = await runCommand(['enqueue', '--csv', csv, '--org', 'acme', '--rejects', p.link], env());
    expect(r.code).toBe(2);
    refusal(r.stderr, p.link);
    p.untouched();
    expect(await h.ctx.store.get('acme', 4)).toBeUndefined();
    await expect(
      enqueueCsv(
        { producer: h.ctx.producer, runs: h.ctx.runs },
        { file: csv, defaultOrg: 'acme', knownOrgs: ['acme'], runId: newRunId(), rejectsFile: p.link },
      ),
    ).rejects.toMatchObject({ code: 'LT_OUTPUT_UNSAFE' });
    p.untouched();
    expect(await h.ctx.store.get('acme', 4)).toBeUndefined();
  });

  it('the drift report and summary of a reconcile: refused before anything is enqueued', async () => {
    for (const name of ['drift.csv', 'drift-summary.json']) {
      const p = plant(name);
      const file = h.writeFile('desired-link.csv', 'learnerId,org\n8,acme\n');
      await expect(
        runReconcile(h.ctx, { file, orgIds: { acme: 1 }, outDir: p.dir }),
        name,
      ).rejects.toMatchObject({
        code: 'LT_OUTPUT_UNSAFE',
        message: expect.stringContaining(p.link),
      });
      p.untouched();
      expect(await h.ctx.store.get('acme', 8)).toBeUndefined(); // learner 8 is beta's: a drift
    }
  });

  it('an export that fails midway leaves the previous file as it was and no temporary file', async () => {
    const dir = join(h.dir, 'failing');
    mkdirSync(dir, { recursive: true });
    const out = join(dir, 'report.csv');
    writeFileSync(out, 'the previous report\n', { mode: 0o600 });
    // A store whose scan yields one real record, then fails (Redis gone mid-report).
    const real = h.ctx.store;
    const failing = {
      async *scan(org: string) {
        for await (const entry of real.scan(org)) {
          yield entry;
          break;
        }
        throw new Error('connection lost mid-report');
      },
    } as unknown as OutcomeStore;
    await expect(writeReport(failing, { orgs: ['acme'] }, { format: 'csv', out })).rejects.toThrow(
      'connection lost mid-report',
    );
    expect(readFileSync(out, 'utf8')).toBe('the previous report\n');
    expect(readdirSync(dir)).toEqual(['report.csv']);
    await expect(writeSplit(failing, { orgs: ['acme'] }, dir)).rejects.toThrow('connection lost');
    expect(readdirSync(dir)).toEqual(['report.csv']);
    // A complete export replaces it (a new file, 0600).
    await writeReport(real, { orgs: ['acme'] }, { format: 'csv', out });
    expect(readFileSync(out, 'utf8')).toMatch(/^org,learnerId,/);
    expect(readdirSync(dir)).toEqual(['report.csv']);
  });
});
