// What a first run is told, and that it is true (issue 48): the target organization's id is remembered
// where the message says; a check ends with the command that applies it, and `enqueue` of a checked CSV
// says it does not use the check; the limits warning names a LIMIT_* only when the environment sets it;
// USER_AGENT unset is warned once, by a command that calls the service; `retry` of outcomes a retry cannot
// help asks at a terminal and needs --yes in a script. Real Redis, the real simulator, the real CLI.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ROOT, runCommand, TEST_DEFAULTS } from '../helpers/cli.ts';
import { track } from '../helpers/children.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ tag: 'first-run', sim: { learners: 60 }, env: { LOG_LEVEL: 'warn' } });
});
afterAll(async () => {
  await h?.close();
});

/** The env of a first run: the harness's, without the LIMIT_PER_* it sets (they are left to their defaults). */
function bareEnv(): Record<string, string> {
  const { LIMIT_PER_TOKEN: _t, LIMIT_PER_ORG: _o, ...rest } = h.env;
  return rest;
}

const USER_AGENT_WARNING = 'USER_AGENT is not set';
const count = (text: string, part: string) => text.split(part).length - 1;

describe('the target organization id', () => {
  it('given to plan --check once, is remembered, and the check ends with the command that applies it', async () => {
    const csv = h.writeFile('cohort.csv', 'learnerId\n2\n3\n4\n9999\n');
    const none = await runCommand(['plan', '--check', '--csv', csv, '--org', 'acme'], h.env);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain(
      'give --target-org-id once (crawl, reconcile, schedule and plan --check remember it in Redis for later runs; a dry run such as plan --crawl uses it for itself only)',
    );
    const first = await runCommand(
      ['plan', '--check', '--csv', csv, '--org', 'acme', '--target-org-id', '1'],
      h.env,
    );
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout.trimEnd().split('\n').slice(-2)).toEqual([
      'to enqueue the learners worth a call (in-target recorded done, unknown and no-user held: no call for them):',
      `  npx learner-transfer plan --check --apply --csv ${csv} --org acme`,
    ]);
    const again = await runCommand(['plan', '--check', '--csv', csv, '--org', 'acme'], h.env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('4 learners of acme checked');
    expect(h.sim.record.filter((r) => r.method === 'PATCH')).toHaveLength(0);
  });

  it('plan --help says which plans remember it', async () => {
    const r = await runCommand(['plan', '--help'], {});
    expect(r.stdout.replace(/\s+/g, ' ')).toContain(
      'plan --check remembers it in Redis for later runs (as crawl and reconcile do); plan --crawl uses it for this plan only',
    );
  });

  it('enqueue of a CSV with a check beside it says it does not use it, and which command does', async () => {
    // cohort.check.csv is beside cohort.csv since the test above.
    const csv = `${h.dir}/cohort.csv`;
    const r = await runCommand(['enqueue', '--csv', csv, '--org', 'acme', '--quiet'], h.env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`${h.dir}/cohort.check.csv: a pre-flight check of cohort.csv, written `);
    expect(r.stderr).toContain(
      'enqueue does not use it: every learner of the file is sent, those the check found in the organization, unknown or without a user too. ' +
        `To enqueue only the learners worth a call, run instead: npx learner-transfer plan --check --apply --csv ${csv} --org acme`,
    );
    const plain = h.writeFile('plain.csv', 'learnerId\n5\n');
    const p = await runCommand(['enqueue', '--csv', plain, '--org', 'acme', '--quiet'], h.env);
    expect(p.code, p.stderr).toBe(0);
    expect(p.stderr).not.toContain('pre-flight check');
  });
});

describe('USER_AGENT', () => {
  it('unset: one warning, from a command that calls the service, naming what is sent instead', async () => {
    const csv = h.writeFile('ua.csv', 'learnerId\n2\n3\n');
    const args = ['plan', '--check', '--csv', csv, '--org', 'acme'];
    const unset = await runCommand(args, h.env);
    expect(unset.code, unset.stderr).toBe(0);
    expect(count(unset.stderr, USER_AGENT_WARNING)).toBe(1);
    expect(unset.stderr).toContain(
      "the Learner API is sent this tool's generic User-Agent 'learner-transfer/0.1 (bulk learner transfer worker)', which names no company. The spec requires a User-Agent that identifies the calling company",
    );
    const set = await runCommand(args, { ...h.env, USER_AGENT: 'Acme Corp migration (ops@acme.example)' });
    expect(set.code, set.stderr).toBe(0);
    expect(set.stderr).not.toContain(USER_AGENT_WARNING);
    // A command that does not call the service has nothing to warn about.
    const status = await runCommand(['status'], h.env);
    expect(status.stderr).not.toContain(USER_AGENT_WARNING);
  });
});

describe('the limits warning', () => {
  it('names a LIMIT_* only when the environment sets it', async () => {
    const env = bareEnv();
    const set = await runCommand(['limits', 'set', '--org', 'acme', '--per-token', '50/1h'], env);
    expect(set.code, set.stderr).toBe(0);
    for (const args of [['limits', 'show', '--org', 'acme'], ['status']]) {
      const r = await runCommand(args, env);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout + r.stderr).not.toMatch(/LIMIT_PER_TOKEN=\S+ .*differ/);
    }
    const told = await runCommand(['limits', 'show', '--org', 'acme'], { ...env, LIMIT_PER_TOKEN: '100/1h' });
    expect(told.stdout).toContain(
      'note: LIMIT_PER_TOKEN=100/1h in this environment differs from Redis (50/1h)',
    );
    expect(told.stderr).toContain(
      'LIMIT_PER_TOKEN=100/1h (stored: 50/1h) differs from the limits stored in Redis',
    );
    // LIMIT_PER_ORG is not set: its built-in default is not said to differ.
    expect(told.stdout).not.toContain('note: LIMIT_PER_ORG');
    expect(told.stderr).not.toContain('LIMIT_PER_ORG=');
    expect((await runCommand(['limits', 'reset', '--org', 'acme'], env)).code).toBe(0);
  });
});

/** The binary at a terminal (`script` gives it a pty), answering `answer` once it asks. */
function retryAtTerminal(answer: string): Promise<{ code: number | null; output: string }> {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const command = [process.execPath, BIN, 'retry', '--status', 'not-found'].map(quote).join(' ');
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      TERM: 'xterm',
      ...TEST_DEFAULTS,
      ...h.env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  track(child);
  let output = '';
  let answered = false;
  const onData = (d: Buffer) => {
    output += d.toString();
    if (!answered && output.includes('type yes to re-queue them all: ')) {
      answered = true;
      child.stdin.write(`${answer}\n`);
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`retry at a terminal did not end; it wrote:\n${output}`));
    }, 60_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output: output.replace(/\r\n/g, '\n') });
    });
  });
}

describe('retry of outcomes a retry cannot help', () => {
  // Unknown to the service: 7001 and 7002, and 9999 of the cohort the enqueue test above sent.
  const MISSING = [7001, 7002, 9999];

  beforeAll(async () => {
    await h.enqueueIds([7001, 7002]);
    await h.workUntilIdle();
    expect(await h.ctx.store.bucketPage('acme', 'not-found', 0, 100)).toHaveLength(3);
    expect(await buckets()).toEqual(['not-found', 'not-found', 'not-found']);
  });

  const buckets = async () => (await h.ctx.store.getMany('acme', MISSING)).map((r) => r?.b);

  it('at a terminal, shows the counts by outcome and asks first: no re-queues nothing', async () => {
    const r = await retryAtTerminal('no');
    expect(r.code, r.output).toBe(0);
    expect(r.output).toContain('retry would re-queue 3 learners, by outcome:');
    expect(r.output).toMatch(
      / {2}not-found {2}3 {2}a retry fails the same way unless .* \[needs confirmation\]/,
    );
    expect(r.output).toContain('retry anyway, 3 not-found included? type yes to re-queue them all: ');
    expect(r.output).toContain('nothing re-queued');
    expect(await buckets()).toEqual(['not-found', 'not-found', 'not-found']);
  });

  it('in a script, refuses without --yes (exit 2, nothing re-queued) and re-queues with it', async () => {
    const refused = await runCommand(['retry', '--status', 'not-found'], h.env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('retry would re-queue 3 not-found, which a retry cannot help');
    expect(refused.stderr).toContain(
      'Nothing was re-queued: add --yes to retry them anyway, or narrow the filter (--status CODE, --learner ID)',
    );
    expect(await buckets()).toEqual(['not-found', 'not-found', 'not-found']);
    const yes = await runCommand(['retry', '--status', 'not-found', '--yes'], h.env);
    expect(yes.code, yes.stderr).toBe(0);
    expect(yes.stdout).toContain('re-queued 3 learners (acme 3)');
    expect(await buckets()).toEqual(['queued', 'queued', 'queued']);
    await h.workUntilIdle();
  });

  it('at a terminal, yes re-queues them', async () => {
    expect(await buckets()).toEqual(['not-found', 'not-found', 'not-found']);
    const r = await retryAtTerminal('yes');
    expect(r.code, r.output).toBe(0);
    expect(r.output).toContain('re-queued 3 learners (acme 3)');
    expect(await buckets()).toEqual(['queued', 'queued', 'queued']);
  });
});
