// The README's commands that no other test runs as a CLI: simulate, retry, tokens unpause, plan --csv
// and reconcile, each as a user types it, against the real simulator and Redis.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, runCli, runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { waitFor } from '../helpers/wait.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ tag: 'cli', sim: { learners: 60, forbiddenLearnerIds: [5] } });
  await h.enqueueIds([2, 3, 5]);
  await h.workUntilIdle();
});
afterAll(async () => {
  await h?.close();
});

describe('the README commands', () => {
  it('simulate serves the spec until Ctrl-C', async () => {
    const child = spawnCli(['simulate', '--port', '0', '--limit-per-token', '10/4s'], {});
    const url = (await waitFor(
      'simulate to print its address',
      () => /http:\/\/127\.0\.0\.1:\d+/.exec(child.output.stdout)?.[0],
      (u) => u !== undefined,
      { timeoutMs: 20_000, everyMs: 50, show: () => child.output.stdout.slice(-600) },
    )) as string;
    const res = await fetch(`${url}/1/learner?page=2`, {
      headers: {
        authorization: 'Bearer sim-acme-1',
        'user-agent': 'readme test',
        accept: 'application/json',
      },
    });
    const body = (await res.json()) as { pagination: { current_page: string; from: number } };
    expect(body.pagination).toMatchObject({ current_page: '2', from: 101 });
    child.kill('SIGINT');
    const r = await waitExit(child, 10_000);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('acme:sim-acme-1');
  });

  it('retry --status forbidden re-queues the learner', async () => {
    const r = await runCommand(['retry', '--status', 'forbidden', '--yes'], h.env);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe('re-queued 1 learner (acme 1)');
    expect((await h.ctx.store.get('acme', 5))?.b).toBe('queued');
    const bad = await runCli(['retry', '--status', 'transferred'], h.env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--status/);
  });

  it('tokens unpause lifts a 401 pause', async () => {
    const [token] = h.config.tokens;
    await h.ctx.budget.block('acme', token?.id ?? '', 'indefinite', '401');
    const listed = await runCommand(['tokens', 'list'], h.env);
    expect(listed.stdout).toContain(`acme ${token?.id}`);
    expect(listed.stdout).toContain('blocked (401)');
    const r = await runCommand(['tokens', 'unpause', '--org', 'acme'], h.env);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe('unpaused 2 tokens of acme');
    const view = await h.ctx.budget.peek(
      'acme',
      h.config.tokens.map((t) => t.id),
    );
    expect(view.tokens.every((t) => t.blocked === null)).toBe(true);
  });

  it('plan --csv says how many and how long, and writes nothing', async () => {
    const r = await runCommand(['plan', '--csv', join(ROOT, 'jobs.example.csv'), '--org', 'acme'], h.env);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/learners for acme: (done|nothing)/);
  });

  it('reconcile --desired reports the drift and enqueues it', async () => {
    const desired = h.writeFile('desired.csv', 'learnerId,org\n8,acme\n2,acme\n');
    const out = join(h.dir, 'drift');
    const r = await runCommand(
      ['reconcile', '--desired', desired, '--org-id', 'acme=1', '--out', out, '--quiet'],
      h.env,
    );
    expect(r.code).toBe(0);
    expect((await h.ctx.store.get('acme', 8))?.b).toBe('queued');
    expect((await h.ctx.store.get('acme', 2))?.b).toBe('transferred');
  });

  it('audit exports every transfer with what it deleted, as NDJSON', async () => {
    const out = join(h.dir, 'audit.ndjson');
    const r = await runCommand(['audit', '--org', 'acme', '--out', out], h.env);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toMatch(/^\d+ audit records? -> /);
    const lines = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const two = lines.find((l) => l.learnerId === 2);
    const sim = h.sim.transfersOf(2)[0];
    expect(two).toMatchObject({ org: 'acme', transferId: sim?.data.transferDetails.transferId });
    expect(two?.result).toEqual(JSON.parse(JSON.stringify(sim?.data)));
    const one = await runCommand(['audit', '--learner', '3'], h.env);
    const only = one.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { learnerId: number });
    expect(only.length).toBeGreaterThanOrEqual(1);
    expect(only.every((l) => l.learnerId === 3)).toBe(true);
    for (const secret of ['sim-acme-1', 'sim-acme-2'])
      expect(readFileSync(out, 'utf8')).not.toContain(secret);
  });
});
