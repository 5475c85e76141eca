// A Redis ACL user, through the real CLI. The least ACL written in docs/redis-acl.md
// runs the whole pipeline; a user missing one rule stops at start with exit 7 and one sentence naming
// it (not a busy loop deaf to signals, not a stack trace); a rule revoked while `work` runs makes the
// workers wait instead of spinning, and SIGTERM still stops them in time. ACL users belong to the whole
// server, so everything runs on a redis-server of the test's own: the shared Redis's ACL is never touched.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { newRedis } from '../helpers/redis.ts';
import { waitForCount } from '../helpers/wait.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';

const PASSWORD = `pw-${randomBytes(6).toString('hex')}`;
const DOC = 'the tool needs the rules in docs/redis-acl.md';

let own: OwnRedis;
let h: Harness;
let admin: Redis;

beforeAll(async () => {
  own = await startOwnRedis();
  h = await startHarness({
    tag: 'acl',
    redisUrl: own.url,
    // Calls that take a moment, so that `work` is mid-run when a rule is revoked.
    sim: { learners: 200, faults: { latencyAfterMs: [150, 300] } },
    env: { LOG_LEVEL: 'warn', LIMIT_PER_TOKEN: '1000/1s', LIMIT_PER_ORG: '1000/1s' },
  });
  admin = newRedis(own.url);
});
afterAll(async () => {
  await h?.close();
  admin?.disconnect();
  await own?.close();
});

/** The rules of the `ACL SETUSER learner-transfer ...` line of docs/redis-acl.md, for this test's prefix. */
function documentedRules(): string[] {
  const doc = readFileSync(join(ROOT, 'docs', 'redis-acl.md'), 'utf8');
  const line = /^ACL SETUSER learner-transfer (.+)$/m.exec(doc)?.[1];
  if (!line) throw new Error('docs/redis-acl.md has no `ACL SETUSER learner-transfer ...` line');
  return line
    .trim()
    .split(/\s+/)
    .map((rule) => (rule === '>PASSWORD' ? `>${PASSWORD}` : rule.replaceAll('ltx:', `${h.prefix}:`)));
}

async function setUser(name: string, rules: string[]): Promise<void> {
  await admin.call('ACL', 'SETUSER', name, 'reset', ...rules);
}

function envAs(user: string): Record<string, string> {
  return { ...h.env, REDIS_URL: `redis://${user}:${PASSWORD}@127.0.0.1:${own.port}` };
}

/** The commands Redis refused since the last ACL LOG RESET (the `object` of each entry). */
async function refusedSinceReset(): Promise<string[]> {
  const entries = (await admin.call('ACL', 'LOG')) as unknown[][];
  return entries.map((e) => String(e[e.indexOf('object') + 1]));
}

/** Calls Redis refused for want of permissions so far (INFO commandstats, every command). */
async function rejectedCalls(): Promise<number> {
  const stats = (await admin.call('INFO', 'commandstats')) as string;
  return [...stats.matchAll(/rejected_calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
}

/** CPU time (user + system) the process has used so far, in seconds (Linux /proc). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces, inside parentheses): utime and stime are the
  // 14th and 15th, in clock ticks of 1/100 s.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

describe('a Redis ACL user', () => {
  it('with the least ACL of docs/redis-acl.md runs the whole pipeline, and is refused nothing it needs', async () => {
    await setUser('lt', documentedRules());
    await admin.call('ACL', 'LOG', 'RESET');
    const env = envAs('lt');
    const ids = learnersNotIn('acme', 5);
    const csv = h.writeFile('least.csv', `learnerId\n${ids.join('\n')}\n`);

    const enqueued = await runCommand(['enqueue', '--csv', csv, '--org', 'acme'], env);
    expect(enqueued.code, enqueued.stderr).toBe(0);
    const work = await runCommand(['work', '--until-idle'], env);
    expect(work.code, work.stderr).toBe(0);
    for (const id of ids) expect((await h.ctx.store.get('acme', id))?.b, `learner ${id}`).toBe('transferred');
    // A live control publishes on the limiter's channel; status reads every family of keys.
    const set = await runCommand(['limits', 'set', '--org', 'acme', '--per-token', '900/1s'], env);
    expect(set.code, set.stderr).toBe(0);
    const status = await runCommand(['status'], env);
    expect(status.code, status.stderr).toBe(0);
    // Only the optional rules were asked for: the eviction and persistence warnings' CONFIG GET.
    for (const refused of await refusedSinceReset()) expect(['config|get', 'client|list']).toContain(refused);
  });

  it('without INFO: work stops at once with exit 7 and the rule, instead of spinning deaf to signals', async () => {
    // The user of the issue: every command but the @dangerous ones (INFO is one), its keys and channels.
    await setUser('lt-noinfo', ['on', `>${PASSWORD}`, `~${h.prefix}:*`, '&*', '+@all', '-@dangerous']);
    const started = Date.now();
    const r = await waitExit(spawnCli(['work'], envAs('lt-noinfo')), 20_000);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(r.code, r.stderr).toBe(7);
    expect(r.stderr.trim()).toBe(
      `learner-transfer: Redis user 'lt-noinfo' may not run 'info' (NOPERM): grant it with ACL SETUSER lt-noinfo +info; ${DOC}`,
    );
  });

  it('without channel rights: limits set stops with exit 7 naming the channel rule, before writing', async () => {
    await setUser(
      'lt-nochan',
      documentedRules().filter((rule) => !rule.startsWith('&')),
    );
    const r = await runCommand(
      ['limits', 'set', '--org', 'acme', '--per-token', '800/1s'],
      envAs('lt-nochan'),
    );
    expect(r.code, r.stderr).toBe(7);
    expect(r.stderr.trim()).toBe(
      `learner-transfer: Redis user 'lt-nochan' may not publish to the channels '${h.prefix}:*' (NOPERM): ` +
        `grant it with ACL SETUSER lt-nochan &${h.prefix}:*; ${DOC}`,
    );
    expect((await admin.hget(h.ctx.keys.policy('acme'), 'token')) ?? '(none)').not.toMatch(/^800\//);
  });

  it('a rule revoked while work runs: the workers wait instead of spinning, and SIGTERM stops them in time', async () => {
    await setUser('lt-live', documentedRules());
    await h.enqueueIds(learnersNotIn('acme', 60, 100));
    const child = spawnCli(['work', '--concurrency', '2'], envAs('lt-live'));
    const patches = () => h.sim.record.filter((r) => r.method === 'PATCH').length;
    const before = patches();
    // The rule is revoked under a worker that is sending, or its waiting proves nothing.
    await waitForCount('transfer calls of the work process', patches, before + 4);

    // The scripts (BullMQ's fetch among them) are refused from now on.
    await admin.call('ACL', 'SETUSER', 'lt-live', '-evalsha', '-eval');
    await sleep(1_500); // the calls in flight end
    const pid = child.pid as number;
    const cpu0 = cpuSeconds(pid);
    const rejected0 = await rejectedCalls();
    const t0 = Date.now();
    await sleep(3_000);
    const cpuShare = (cpuSeconds(pid) - cpu0) / ((Date.now() - t0) / 1000);
    const rejected = (await rejectedCalls()) - rejected0;
    // A busy loop has thousands of commands refused a second, and keeps the process busy between them.
    const seen = `${rejected} calls refused and ${cpuShare.toFixed(2)} of a core used in 3 s`;
    expect(rejected, seen).toBeLessThan(60);
    expect(cpuShare, seen).toBeLessThan(0.15);

    const signalledAt = Date.now();
    child.kill('SIGTERM');
    const r = await waitExit(child, 20_000);
    // The bound of `work`: REQUEST_TIMEOUT (1.5 s here) + 10 s.
    expect(Date.now() - signalledAt).toBeLessThan(11_500);
    expect(r.code, r.stderr).toBe(130);
    // Said with the rule to grant (EVALSHA or EVAL, whichever a worker met first), not as a stack.
    expect(r.stderr).toMatch(
      /Redis user 'lt-live' may not run '(eval|evalsha)' \(NOPERM\): grant it with ACL SETUSER lt-live \+\1;/,
    );
    expect(r.stderr).not.toMatch(/unexpected error|\n\s+at /);
  });
});
