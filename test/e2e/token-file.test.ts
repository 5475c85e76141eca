// A real `work` process configured by LEARNER_API_TOKENS_FILE, against the simulator: a token rotated in
// the file is taken on SIGHUP, and one added or removed is taken on the reload interval with no signal.
// Calls after a reload use the new tokens (the simulator's record names the token of every request), the
// removed one is used by no new call, a token Redis binds to another organization is refused and never
// sent, and a bad file changes nothing. The change log holds token ids; no token is in the process's
// output or anywhere in Redis under the test's prefix. A bad file at start stops `work` with exit 3.
import { tokenLeaks, writeTokenFile } from '../helpers/token-leaks.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenFingerprint } from '../../src/core/config.ts';
import { readChanges } from '../../src/limiter/control-log.ts';
import { bindTokens } from '../../src/limiter/token-orgs.ts';
import { runCli, runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { dumpPrefix } from '../helpers/redis.ts';
import { waitForCount, waitUntil } from '../helpers/wait.ts';

const A = 'tfA-Qk7vT2mXw9LpR4nB8cZ3';
const B = 'tfB-Hy6dF1gJ0kS5uE2aXoVi';
const C = 'tfC-Wn3bM8qC5rT1zP7yL4eK';
const D = 'tfD-Jd2sG9hV6xN3cQ8wR5tU';
const ALL = [A, B, C, D];
const id = tokenFingerprint;
/** The simulator's label of each token: the order they are given to it. */
const LABEL = { A: 'acme#1', B: 'acme#2', C: 'acme#3', D: 'acme#4' } as const;
const CONCURRENCY = 2;

let h: Harness;
const secretsDir = mkdtempSync(join(tmpdir(), 'lt-tokfile-'));
const path = join(secretsDir, 'learner-tokens');
const outputs: string[] = [];

const writeTokens = (text: string) => writeTokenFile(path, text);

/** Transfer calls the simulator received with a token (by its label). */
const uses = (label: string) =>
  h.sim.record.filter((r) => r.method === 'PATCH' && r.tokenLabel === label).length;

const leaks = (texts: readonly string[]) => tokenLeaks(texts, ALL);

const count = (text: string, re: RegExp) => text.match(new RegExp(re.source, 'g'))?.length ?? 0;

beforeAll(async () => {
  writeTokens(`acme:${A}\n`);
  h = await startHarness({
    tag: 'tokfile',
    sim: {
      learners: 1000,
      tokens: [A, B, C, D].map((token) => ({ token, org: 'acme' })),
      faults: { latencyAfterMs: [20, 60] },
    },
    env: { LEARNER_API_TOKENS: '', LEARNER_API_TOKENS_FILE: path },
  });
  await h.enqueueIds(learnersNotIn('acme', 600));
});

afterAll(async () => {
  await h?.close();
  rmSync(secretsDir, { recursive: true, force: true });
});

describe('work with LEARNER_API_TOKENS_FILE', () => {
  it('takes a rotated token on SIGHUP: no new call with the old one, and a bad file changes nothing', async () => {
    writeTokens(`# acme's token\nacme:${A}\n`);
    const child = spawnCli(['work', '--concurrency', String(CONCURRENCY)], {
      ...h.env,
      TOKENS_RELOAD_INTERVAL: '0', // only the signal reads the file again
    });
    await waitForCount('calls with token A', () => uses(LABEL.A), 5);

    writeTokens(`# rotated\r\nacme:${B}\r\n`);
    child.kill('SIGHUP');
    await waitUntil('the reload to be logged', () => /tokens reloaded from/.test(child.output.stderr));
    const aAtReload = uses(LABEL.A);
    await waitForCount('calls with token B', () => uses(LABEL.B), 10);
    const aAfter = uses(LABEL.A);
    // Only calls admitted before the swap (one per slot at most) may still carry A.
    expect(aAfter - aAtReload).toBeLessThanOrEqual(CONCURRENCY);
    const bNow = uses(LABEL.B);
    await waitForCount('more calls with token B', () => uses(LABEL.B), bNow + 15);
    expect(uses(LABEL.A), 'calls with the removed token A').toBe(aAfter);

    // A bad line: the tokens in force stay (B goes on), the error names the file and the line.
    writeTokens(`acme:${B}\n\nacme ${C}\n`);
    child.kill('SIGHUP');
    await waitUntil('the bad line to be logged', () =>
      child.output.stderr.includes(`${path} line 3: not ORG:TOKEN`),
    );
    const bAtBad = uses(LABEL.B);
    await waitForCount('calls with token B after the bad file', () => uses(LABEL.B), bAtBad + 5);
    expect(uses(LABEL.C)).toBe(0);

    child.kill('SIGTERM');
    const r = await waitExit(child, 30_000);
    outputs.push(r.stdout, r.stderr);
    expect(r.code).toBe(130);
    // The calls made with A before and during the reload were answered, none cut off.
    expect(h.sim.record.filter((x) => x.method === 'PATCH' && x.status === 0)).toEqual([]);

    const entries = (await readChanges(h.ctx.redis, h.ctx.keys, { org: 'acme' })).filter(
      (c) => c.action === 'tokens.reload',
    );
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      org: 'acme',
      who: expect.stringMatching(new RegExp(`^work:.+@.+:${child.pid}$`)),
      details: { file: path, trigger: 'SIGHUP', added: [id(B)], removed: [id(A)] },
    });
  });

  it('takes an added and a removed token on the interval with no signal, and refuses one bound elsewhere', async () => {
    // D is beta's in Redis: given to acme in the file, it must be refused and never sent.
    await bindTokens(h.ctx.redis, h.prefix, [{ id: id(D), org: 'beta' }]);
    writeTokens(`acme:${B}\n`);
    const child = spawnCli(['work', '--concurrency', String(CONCURRENCY)], {
      ...h.env,
      TOKENS_RELOAD_INTERVAL: '300ms',
    });
    const bStart = uses(LABEL.B);
    await waitForCount('calls with token B', () => uses(LABEL.B), bStart + 5);

    writeTokens(`acme:${B}\nacme:${C}\n`);
    await waitForCount('calls with the added token C', () => uses(LABEL.C), 5);

    writeTokens(`acme:${C}\n# D is beta's\nacme:${D}\n`);
    await waitUntil(
      'the removal of B to be logged',
      () => count(child.output.stderr, /tokens reloaded from/) >= 2,
    );
    const bAtRemoval = uses(LABEL.B);
    await waitForCount('calls with token C', () => uses(LABEL.C), uses(LABEL.C) + 10);
    const bAfter = uses(LABEL.B);
    expect(bAfter - bAtRemoval).toBeLessThanOrEqual(CONCURRENCY);
    const cNow = uses(LABEL.C);
    await waitForCount('more calls with token C', () => uses(LABEL.C), cNow + 15);
    expect(uses(LABEL.B), 'calls with the removed token B').toBe(bAfter);
    expect(uses(LABEL.D), 'calls with the refused token D').toBe(0);
    expect(child.output.stderr).toContain(
      `token ${id(D)} is bound to organization 'beta' in Redis but LEARNER_API_TOKENS_FILE ${path} gives it to 'acme': token refused, not used`,
    );

    child.kill('SIGTERM');
    const r = await waitExit(child, 30_000);
    outputs.push(r.stdout, r.stderr);
    expect(r.code).toBe(130);

    const entries = (await readChanges(h.ctx.redis, h.ctx.keys, { org: 'acme' }))
      .filter((c) => c.action === 'tokens.reload' && c.who.endsWith(`:${child.pid}`))
      .map((c) => c.details);
    expect(entries).toEqual([
      {
        file: path,
        trigger: 'interval',
        added: [],
        removed: [id(B)],
        refused: [{ tokenId: id(D), boundTo: 'beta' }],
      },
      { file: path, trigger: 'interval', added: [id(C)], removed: [] },
    ]);
    // The operator's view of the same log.
    const listed = await runCommand(['changes', '--org', 'acme', '--limit', '1'], h.env);
    expect(listed.stdout).toMatch(
      new RegExp(
        `  work:\\S+:${child.pid}  tokens\\.reload  acme  file ${path}, trigger interval, added -, ` +
          `removed ${id(B)}, refused \\{"tokenId":"${id(D)}","boundTo":"beta"\\}\\n$`,
      ),
    );
  });

  it('leaves no token in the processes output nor anywhere in Redis', async () => {
    expect(outputs.length).toBe(4);
    expect(outputs.join('').length).toBeGreaterThan(10_000); // debug logs: plenty of lines to scan
    expect(leaks(outputs)).toEqual([]);
    const redis = await dumpPrefix(h.ctx.redis, h.prefix);
    expect(redis.length).toBeGreaterThan(100);
    expect(leaks(redis)).toEqual([]);
  });

  it('stops at start on a bad file, naming the file and the line, never the token', async () => {
    const bad = h.writeFile('bad-tokens', `acme:${A}\nacme=${B}\n`);
    const r = await runCli(['work', '--until-idle'], { ...h.env, LEARNER_API_TOKENS_FILE: bad }, 30_000);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`LEARNER_API_TOKENS_FILE ${bad} line 2: not ORG:TOKEN`);
    const both = await runCli(
      ['work', '--until-idle'],
      { ...h.env, LEARNER_API_TOKENS: `acme:${C}` },
      30_000,
    );
    expect(both.code).toBe(3);
    expect(both.stderr).toContain('LEARNER_API_TOKENS, LEARNER_API_TOKENS_FILE: both are set');
    expect(leaks([r.stdout, r.stderr, both.stdout, both.stderr])).toEqual([]);
  });
});
