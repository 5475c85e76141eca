// A token revoked mid-run: its work pauses with an alert, the other token of its organization goes on;
// an organization whose only token is revoked keeps its learners waiting (no attempt used) and
// `work --until-idle` stops with exit 6 instead of hanging.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/shared.ts';
import { tokenFingerprint } from '../../src/core/config.ts';
import { spawnCli, waitExit } from '../helpers/cli.ts';
import { aimAtCallInFlight, expectAtStake } from '../helpers/at-stake.ts';
import { expectOutcomes } from '../helpers/outcomes-check.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { waitFor } from '../helpers/wait.ts';

let h: Harness;
const acmeIds: number[] = [];
const betaIds: number[] = [];
acmeIds.push(...learnersNotIn('acme', 60));
betaIds.push(...learnersNotIn('beta', 40, 301));

beforeAll(async () => {
  h = await startHarness({
    tag: 'chaos-tokens',
    sim: {
      learners: 600,
      // A call takes a moment, so that the revocation can fall while calls are in flight.
      faults: { latencyAfterMs: [20, 60] },
      limits: {
        perToken: { max: 10, windowMs: 2000 },
        perOrg: { max: 40, windowMs: 2000 },
        window: 'rolling',
      },
    },
    env: {
      LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1',
      LIMIT_PER_TOKEN: '10/2s',
      LIMIT_PER_ORG: '40/2s',
      LOG_LEVEL: 'info',
    },
  });
});
afterAll(async () => {
  await h?.close();
});

describe('tokens revoked mid-run', () => {
  it('pauses the refused token with an alert, the other goes on; all of an org refused exits 6', async () => {
    const { runId } = await h.enqueueIds(acmeIds, 'acme');
    await h.enqueueIds(betaIds, 'beta', { runId });
    const worker = spawnCli(['work', '--until-idle', '--concurrency', '4'], h.env);
    const moved = (org: string) => h.sim.record.filter((r) => r.effectApplied && r.org === org).length;
    await waitFor(
      'acme to move 10 learners and beta 5',
      () => ({ acme: moved('acme'), beta: moved('beta') }),
      (m) => m.acme >= 10 && m.beta >= 5,
    );
    const stake = await aimAtCallInFlight(h.sim, [...acmeIds, ...betaIds], 'the revocation');
    h.sim.revokeToken('sim-acme-1');
    h.sim.revokeToken('sim-beta-1');
    const revokedAt = h.sim.record.length;
    expectAtStake(stake);
    const r = await waitExit(worker, 120_000);

    expect(r.code, r.stderr.slice(-3000)).toBe(EXIT.unauthorized);
    expect(r.stderr).toContain('workers stopped (unauthorized)');
    expect(r.stderr).toContain('every token refused (401) for: beta');
    // The alert names the token by its fingerprint, and the way out.
    const acme1 = tokenFingerprint('sim-acme-1');
    expect(r.stderr).toContain(`token ${acme1} of organization 'acme' was refused (401): it is paused`);
    expect(r.stderr).toContain("every token of organization 'beta' was refused (401)");
    expect(r.stderr).not.toContain('sim-acme-1');
    expect(r.stderr).not.toContain('sim-beta-1');

    // acme: the other token finished every learner.
    const acme = await expectOutcomes(h.ctx, h.sim, { org: 'acme', ids: acmeIds });
    expect(acme.transferred).toHaveLength(acmeIds.length);
    const after = h.sim.record.slice(revokedAt);
    expect(after.filter((e) => e.tokenLabel === 'acme#2' && e.status === 200).length).toBeGreaterThan(0);
    // The refused token was paused at once, not hammered: at most the requests already in flight.
    expect(
      h.sim.record.filter((e) => e.tokenLabel === 'acme#1' && e.status === 401).length,
    ).toBeLessThanOrEqual(4);
    expect(
      h.sim.record.filter((e) => e.tokenLabel === 'beta#1' && e.status === 401).length,
    ).toBeLessThanOrEqual(4);

    // beta: learners wait for a token, without having used an attempt on the refusal.
    const beta = await expectOutcomes(h.ctx, h.sim, {
      org: 'beta',
      ids: betaIds,
      allowed: ['transferred', 'queued', 'retrying'],
    });
    expect(beta.transferred?.length ?? 0).toBeGreaterThanOrEqual(5);
    const waiting = [...(beta.queued ?? []), ...(beta.retrying ?? [])];
    expect(waiting.length).toBeGreaterThan(0);
    for (const rec of await h.ctx.store.getMany('beta', waiting)) expect(rec?.a ?? 0).toBe(0);
    const view = await h.ctx.budget.peek('beta', [tokenFingerprint('sim-beta-1')]);
    expect(view.tokens[0]?.blocked).toEqual({ reason: '401', remainingMs: null });
    expect(h.sim.violations()).toEqual([]);
  }, 150_000);
});
