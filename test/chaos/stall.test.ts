// A worker frozen (SIGSTOP, as a VM stall, a long GC pause or a closed laptop lid would) longer than its
// REQUEST_TIMEOUT while calls are in flight, and the service answering during the freeze: every answer
// that arrived is recorded with the authorizations it revoked (whole bodies, and cut ones as far as they
// came), the freeze is logged as a stall and not as a slow service, and nothing is called twice. A freeze
// so long that another worker takes the learners over is stall-takeover.test.ts's.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnCli, waitExit } from '../helpers/cli.ts';
import { atStake, expectAtStake } from '../helpers/at-stake.ts';
import { expectOutcomes } from '../helpers/outcomes-check.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import type { RequestRecord } from '../../src/simulator/index.ts';
import { waitFor } from '../helpers/wait.ts';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** The workers' REQUEST_TIMEOUT in these runs (ms). */
const REQUEST_TIMEOUT_MS = 4000;
/**
 * How far a reported stall may exceed the measured freeze: the event loop's lag before the SIGSTOP took
 * hold and the wake's delay after SIGCONT (both milliseconds on an idle machine; 5x headroom for a busy one).
 */
const WAKE_SLACK_MS = 1500;
/**
 * An answer the service sent this long before the latest moment the worker can have given up on its call
 * had arrived before the timer gave up on it (see timedOutCall).
 */
const ANSWER_SLACK_MS = 1000;

const patches = (harness: Harness): RequestRecord[] => harness.sim.record.filter((r) => r.method === 'PATCH');
const inFlight = (harness: Harness): RequestRecord[] => patches(harness).filter((r) => r.status === 0);

/**
 * The call a timeout's log line is about: the learner's latest call the service received before the line
 * (its retry comes after). With when, at the latest, the worker gave up on it: not after the line (the
 * outcome is recorded before it is logged), nor more than the attempt's durationMs after the call reached
 * the service (the attempt began before its call left).
 */
function timedOutCall(harness: Harness, l: Record<string, unknown>) {
  const at = l.time as number;
  const call = patches(harness)
    .filter((r) => r.learnerId === l.learnerId && r.receivedAt <= at)
    .at(-1);
  return call && { call, givenUpBy: Math.min(at, call.receivedAt + (l.durationMs as number)) };
}

/** The worker's JSON log lines. */
function logLines(stderr: string): Record<string, unknown>[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('a worker frozen past its request timeout', () => {
  for (const body of ['whole', 'cut'] as const) {
    it(`keeps every answer that arrived during the freeze (${body} bodies)`, async () => {
      h = await startHarness({
        tag: `stall-${body}`,
        sim: {
          learners: 200,
          // Cut bodies: every 200 is cut in half; the retry meets the 400 "already associated".
          repeatMode: body === 'cut' ? 'error' : 'mixed',
          faults: { latencyAfterMs: [1000, 3000], ...(body === 'cut' ? { truncateRate: 1 } : {}) },
        },
        env: {
          REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`,
          LIMIT_PER_TOKEN: '200/1s',
          LIMIT_PER_ORG: '400/1s',
          LOG_LEVEL: 'info',
        },
      });
      const harness = h;
      const ids = learnersNotIn('acme', 40);
      await harness.enqueueIds(ids);
      const worker = spawnCli(['work', '--until-idle', '--concurrency', '10'], harness.env);

      // Twice: frozen for 7 s (longer than REQUEST_TIMEOUT) while at least 5 calls are in flight.
      const freezes: { from: number; to: number; calls: number[] }[] = [];
      for (let i = 0; i < 2; i++) {
        await waitFor(
          `5 calls in flight before freeze ${i + 1}`,
          () => inFlight(harness).length,
          (n) => n >= 5,
          // The first includes the worker's start: a whole program's import, slow on a busy machine.
          { timeoutMs: 120_000 },
        );
        const calls = inFlight(harness).map((r) => r.seq);
        const stake = atStake(harness.sim, ids, `freeze ${i + 1}`);
        const from = Date.now();
        worker.kill('SIGSTOP');
        expectAtStake(stake, 5);
        await sleep(7000);
        const to = Date.now();
        worker.kill('SIGCONT');
        freezes.push({ from, to, calls });
        await sleep(300);
      }
      const result = await waitExit(worker, 120_000);
      expect(result.code, result.stderr.slice(-3000)).toBe(0);

      // Something was at stake: calls in flight at each freeze were answered during it, with the
      // authorizations their transfers revoked.
      let revokedDuringFreezes = 0;
      for (const f of freezes) {
        const answered = patches(harness).filter(
          (r) =>
            f.calls.includes(r.seq) &&
            r.respondedAt !== undefined &&
            r.respondedAt > f.from &&
            r.respondedAt < f.to,
        );
        expect(answered.length, 'calls answered during the freeze').toBeGreaterThanOrEqual(5);
        for (const r of answered.filter((a) => a.effectApplied && a.learnerId !== undefined)) {
          revokedDuringFreezes += harness.sim.transfersOf(r.learnerId as number)[0]?.data.authorizations
            .revoked.length as number;
        }
      }
      expect(
        revokedDuringFreezes,
        'authorizations revoked by answers sent during the freezes',
      ).toBeGreaterThan(0);

      // Every learner ended right, moved once, every revocation is in the audit (outcomes-check.ts).
      const tally = await expectOutcomes(harness.ctx, harness.sim, { org: 'acme', ids });
      expect((tally.transferred?.length ?? 0) + (tally['already-in-org']?.length ?? 0)).toBe(ids.length);
      expect(harness.sim.overlaps()).toEqual([]);

      // No timer threw an answer away. Nothing but the freezes is injected: an attempt may end as a network
      // error only by our own timeout (ABORT_ERR), and only for a call whose answer the service had not sent
      // when the worker gave up on it. A busy machine can hold a call past its timeout with no stall: a run
      // of eight load-sensitive files at once had one written 3.7 s after its start (just within its send
      // window) and given up at its hard bound 4 s later, no stall seen. One whose answer had been sent a
      // second or more before the worker can have given up on it (ANSWER_SLACK_MS) was thrown away.
      const lines = logLines(result.stderr);
      const outcomes = lines.filter((l) => l.msg === 'transfer outcome');
      const networkErrors = outcomes.filter((l) => l.code === 'network-error');
      const answeredBefore = (l: Record<string, unknown>) => {
        const t = timedOutCall(harness, l);
        return t?.call.respondedAt !== undefined && t.call.respondedAt < t.givenUpBy - ANSWER_SLACK_MS;
      };
      const thrownAway = networkErrors.filter((l) => l.error !== 'ABORT_ERR' || answeredBefore(l));
      // A failure says when each such call reached the service and was answered, against the freezes
      // (ms after the first began), and when the worker logged its end.
      const t0 = freezes[0]?.from ?? 0;
      const account = {
        freezes: freezes.map((f) => [f.from - t0, f.to - t0]),
        calls: networkErrors.map((l) => ({
          outcome: { ...l, loggedAt: (l.time as number) - t0 },
          service: patches(harness)
            .filter((r) => r.learnerId === l.learnerId)
            .map((r) => ({
              seq: r.seq,
              receivedAt: r.receivedAt - t0,
              respondedAt: r.respondedAt === undefined ? null : r.respondedAt - t0,
              status: r.status,
              effectApplied: r.effectApplied,
            })),
        })),
      };
      expect(thrownAway, JSON.stringify(account, null, 1)).toEqual([]);
      // The calls the machine held past their timeout, unanswered when given up: their learners end as
      // possible repeats found moved (already-in-org), as every unanswered call does. A few at most, or the
      // freezes proved nothing.
      const unanswered = networkErrors.filter((l) => !thrownAway.includes(l));
      const late = new Set(unanswered.map((l) => l.learnerId as number));
      expect(late.size, JSON.stringify(account, null, 1)).toBeLessThanOrEqual(ids.length / 10);
      /** The calls given up unanswered: their answers were read by nobody. */
      const givenUp = new Set(unanswered.map((l) => timedOutCall(harness, l)?.call.seq));
      // Each freeze logged once, after its wake, as a stall with its length: how late the earliest call
      // timer fired. That timer was due at most REQUEST_TIMEOUT after the freeze began and no earlier than
      // it began (an earlier one had fired), and the worker woke at the freeze's end: so the stall is the
      // measured freeze less at most REQUEST_TIMEOUT, and not longer than the freeze.
      const stalls = lines.filter((l) => typeof l.msg === 'string' && l.msg.includes('was stalled for'));
      expect(stalls.map((l) => l.stalledMs)).toHaveLength(2);
      freezes.forEach((f, i) => {
        const s = stalls[i] as Record<string, unknown>;
        const stalledMs = s.stalledMs as number;
        const frozenMs = f.to - f.from;
        const account = `freeze ${i + 1}: ${frozenMs} ms, logged ${JSON.stringify(s)}`;
        expect(s.time as number, account).toBeGreaterThanOrEqual(f.to);
        expect(stalledMs, account).toBeGreaterThanOrEqual(frozenMs - REQUEST_TIMEOUT_MS - 250);
        expect(stalledMs, account).toBeLessThanOrEqual(frozenMs + WAKE_SLACK_MS);
      });

      const records = await harness.ctx.store.getMany('acme', ids);
      if (body === 'whole') {
        // Every answer was read: nothing is an unknown, nobody a possible repeat but a late call's learner.
        expect(ids.filter((id, i) => records[i]?.pr === 1 && !late.has(id))).toEqual([]);
        expect(tally.transferred?.length ?? 0).toBeGreaterThanOrEqual(ids.length - late.size);
      } else {
        // Every cut body is in the audit exactly as far as it came: all the bytes the service sent.
        // (A late call's answer came after the worker had given up on it: read by nobody.)
        const sent = patches(harness).filter((r) => r.fault === 'truncate' && !givenUp.has(r.seq));
        expect(sent.length).toBeGreaterThanOrEqual(ids.length - late.size);
        const kept = new Map<number, string[]>();
        for await (const e of harness.ctx.store.audit('acme')) {
          if (e.kind === 'unreadable') kept.set(e.learnerId, [...(kept.get(e.learnerId) ?? []), e.raw ?? '']);
        }
        for (const r of sent) {
          expect(r.partialBody?.length, `learner ${r.learnerId}`).toBeGreaterThan(0);
          expect(kept.get(r.learnerId as number), `learner ${r.learnerId}`).toContain(r.partialBody);
        }
      }
    }, 180_000);
  }
});
