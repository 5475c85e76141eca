// The README's "A first real migration", run as a newcomer runs it: its command block, as written, as a
// bash script against the simulator. Only the placeholders a reader replaces are replaced (the service's
// address, the tokens file, the spool and archive directories) and `npx learner-transfer` runs this
// checkout's binary. The cohort mixes learners to move, unknown ids, learners without a user and learners
// already in the organization: the simulator's request record must hold a transfer for the first kind
// only, one each.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSimulator, type Simulator } from '../../src/simulator/index.ts';
import { deleteKeysUnder } from '../../src/redis/client.ts';
import { BIN, ROOT } from '../helpers/cli.ts';
import { newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';
import { track } from '../helpers/children.ts';

const ACME = 1;
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The first ```sh block of the README's first-migration section. */
function firstMigrationBlock(): string {
  const start = readme.indexOf('## A first real migration');
  const section = readme.slice(start, readme.indexOf('\n## ', start + 3));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error('README: no sh block in "A first real migration"');
  return block;
}

/** The placeholders a reader replaces, each of which the block must hold. */
function placed(block: string, values: Record<string, string>): string {
  let out = block;
  for (const [from, to] of Object.entries(values)) {
    expect(out, `the README's block names ${from}`).toContain(from);
    out = out.split(from).join(to);
  }
  return out;
}

let sim: Simulator;
let dir: string;
const prefix = randomPrefix('readme-mig');

beforeAll(async () => {
  sim = createSimulator({ learners: 120 });
  await sim.listen();
  dir = mkdtempSync(join(tmpdir(), 'lt-first-migration-'));
});
afterAll(async () => {
  await sim?.close();
  const redis = newRedis();
  await deleteKeysUnder(redis, prefix);
  await redis.quit();
});

/** Runs `script` with bash in `cwd`. */
function bash(script: string, cwd: string, env: Record<string, string>) {
  const child = spawn('bash', ['-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr })),
  );
}

describe("README's first migration", () => {
  it('run as written, spends calls on the learners worth one only', async () => {
    // The cohort: active learners with a user outside acme, unknown ids, userless ones, and some in acme.
    const good: number[] = [];
    const noUser: number[] = [];
    const inAcme: number[] = [];
    for (let id = 1; id <= 120; id++) {
      const l = sim.learner(id);
      if (!l) continue;
      if (l.organizationId === ACME) {
        if (inAcme.length < 3) inAcme.push(id);
      } else if (l.userId === null) {
        if (noUser.length < 3) noUser.push(id);
      } else if (l.isActive === 1 && good.length < 14) good.push(id);
    }
    const unknown = [5001, 5002, 5003];
    expect([good.length, noUser.length, inAcme.length]).toEqual([14, 3, 3]);
    const cohort = [...unknown, ...good.slice(0, 7), ...noUser, ...inAcme, ...good.slice(7)];
    writeFileSync(join(dir, 'cohort.csv'), `learnerId\n${cohort.join('\n')}\n`);
    const tokens = join(dir, 'learner-tokens');
    writeFileSync(tokens, 'acme:sim-acme-1\nacme:sim-acme-2\n', { mode: 0o600 });

    const block = placed(firstMigrationBlock(), {
      '/run/secrets/learner-tokens': tokens,
      'https://api.example.com': sim.url,
      '/var/lib/learner-transfer': join(dir, 'var'),
    });
    const script = [
      // `npx learner-transfer ARGS` is this checkout's binary; a command that fails says so, with its status.
      `npx() { [ "$1" = learner-transfer ] || return 127; "${process.execPath}" "${BIN}" "\${@:2}" ` +
        `|| { s=$?; echo "FAILED $s: $*" >&2; return $s; }; }`,
      block,
    ].join('\n');
    const r = await bash(script, dir, {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      REDIS_URL,
      QUEUE_PREFIX: prefix,
    });
    const failed = r.stderr.split('\n').filter((l) => l.startsWith('FAILED '));
    // Only `work --until-idle` ends non-zero: the held learners (unknown, userless) wait for a decision.
    expect(failed, r.stderr.slice(-3000)).toEqual(['FAILED 1: learner-transfer work --until-idle']);

    // The calls went to the good learners, one each, and none to the others.
    const patched = sim.record
      .filter((q) => q.method === 'PATCH')
      .map((q) => Number(/\/1\/learner\/(\d+)\/transfer/.exec(q.path)?.[1]));
    expect([...patched].sort((a, b) => a - b)).toEqual([...good].sort((a, b) => a - b));
    for (const id of good) expect(sim.learner(id)?.organizationId).toBe(ACME);

    // The check printed the very command the README's next line runs.
    const apply = /^npx learner-transfer plan --check --apply .*?(?=\s+#|$)/m.exec(firstMigrationBlock());
    expect(r.stdout).toContain(`  ${apply?.[0]}\n`);
    expect(r.stdout).toMatch(/applied as run \S+: 14 enqueued; 3 recorded already-in-org .*; 6 held/);
    // USER_AGENT and the limits are set as the README says: no warning about either.
    expect(r.stderr).not.toContain('USER_AGENT is not set');
    expect(r.stderr).not.toMatch(/LIMIT_\w+=\S+ .*differ/);

    // report --split: successes and failures by learner id; the empty ones said so.
    const ids = (file: string) =>
      readFileSync(join(dir, 'out', 'cohort', file), 'utf8')
        .trim()
        .split('\n')
        .slice(1)
        .map((line) => Number(line.split(',')[1]));
    expect(ids('successes.csv')).toEqual([...good, ...inAcme].sort((a, b) => a - b));
    expect(ids('failures.csv')).toEqual([...noUser, ...unknown].sort((a, b) => a - b));
    expect(r.stdout).toMatch(/^pending +0 -> out\/cohort\/pending\.csv \(empty: header only\)$/m);
    expect(r.stdout).toMatch(/^successes +17 -> out\/cohort\/successes\.csv$/m);
    expect(r.stdout).toContain('re-queued 0 learners');
  }, 300_000);
});
