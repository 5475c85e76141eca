// Model-based test of the limiter: random command lists (acquire, settle, abandon, release, learn from a
// 429, clock steps, limits set/reset with reserves, pause/resume, blocks until unblock, peek, the pacing
// burst set or stored malformed, a run window opened and closed) run on the real TransferBudget over the
// real Redis, two organizations of three tokens each, against a small reference model of the windows,
// the buckets and the run window (limiter-model.ts, limiter-pace.ts; the commands and the lists run
// first: limiter-commands.ts; the state compared: limiter-state.ts). The seed is fixed (300 runs, a few
// seconds); fast-check shrinks a failing list and prints it with its seed and path: replay with
// TEST_SEED=<seed> (and TEST_PATH=<path> to skip the search), more runs with TEST_RUNS. The error names
// the step that failed: the commands after it in the printed list never ran (a plain list shrinks by
// dropping its head, so a tail may stay).
//
// The clock. The scripts read Redis TIME through one part, src/limiter/includes/clock.lua; this file
// loads the same spliced scripts with that part replaced by a stepped clock read from a last ARGV
// (limiter-clock.ts), so a run steps time exactly: to the very ms a permit leaves a window, passes its
// deadline, a bucket allows one more or a run window opens or closes, where off-by-ones live, and
// hundreds of runs take seconds, not hours of compressed real time and luck. The production scripts are
// not touched (a test below checks that they still read TIME, only there) and the keys stay declared
// exactly (a clock ARGV, no clock key). The run window's `open` field is written here by hand in
// stepped-clock ms (limits set computes it from the host's clock); with no calendar fields stored, a
// stale one is removed by TransferBudget's refresh, which the model follows. Three things still run on
// the host's clock and are kept out of the model's way: key TTLs (windows here are seconds of stepped
// time, so a log lives window + in-flight TTL + 1 s of real time, far longer than one run; the pace hash
// may live only 1 s, so after each command that writes its TTL is set to a minute: a tat that outlives
// its bucket's refill reads as a full bucket, as an absent one does), 429 blocks with a Retry-After (only
// blocks until unblock are used), and the `open` that limits set would compute.
//
// What is checked, after every command that writes:
// - every answer of acquire (granted or not, which token, the scope, the exact wait, the time, the
//   malformed burst it named) and of peek (pace views included) is the model's;
// - every sorted set of both organizations (in flight: id -> deadline, log: id -> score) is the model's,
//   and so are the policy fields acquire reads and the pace hash (tats as numbers, to 1e-3): nothing
//   granted is lost or freed early, a released permit leaves flight in both scopes, a settled or
//   abandoned one stays in the log for its window;
// - the window bound, exactly and apart from the model's counts: for each permit granted, the permits
//   of its token and of its organization that the service may count in one window with it (acquired no
//   later, not released, last possible count time = the earlier of its deadline and its first response,
//   the premise of acquire.lua's proof) number at most the limit in force (reserve and learned limit
//   applied). Only permits acquired since the scope's window last changed are counted together: the
//   proof holds a limit from then on ("When the policy changes" in acquire.lua);
// - the bucket bound, apart from the model's tats: for each scope, the grants since its (burst, interval)
//   last changed hold at most burst + span / interval in any span of them (limiter-pace.ts).
// Where the model is conservative: it does not recompute what learn.lua learns from a 429 (which
// permits the service had accepted); it takes the learned value learn.lua stored and checks only that
// learning never raises the limit in force, that learn.lua saw the limits the model has in force, and
// the learned entry's time. Every acquire after it is checked exactly. Not modelled: leases, and blocks
// with a Retry-After (see the clock above). Last, the runs must have met every kind of answer and edge
// the checks are about (a full window, each refusal, a late settle, a release after the deadline, an
// empty bucket, a closed run window and its edges...), or the test fails: a property that never filled
// a window would pass with nothing at stake.
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeBurst } from '../../src/core/burst.ts';
import type { Rate } from '../../src/core/duration.ts';
import { TransferBudget } from '../../src/limiter/index.ts';
import { resetLimits, setLimits, setPaused, type LimitChange } from '../../src/limiter/policy-control.ts';
import type { FallbackLimits } from '../../src/limiter/policy.ts';
import { LIMITER_SCRIPTS } from '../../src/limiter/scripts.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import { installSteppedClock, PRODUCTION_CLOCK, SteppedClock } from './limiter-clock.ts';
import {
  command,
  EXAMPLES,
  FAR_HORIZON_MS,
  setup,
  TOKENS,
  WINDOWS,
  type Cmd,
  type Setup,
} from './limiter-commands.ts';
import {
  acquire as modelAcquire,
  boundsAt,
  configuredLimits,
  edgesAfter,
  encodeRate,
  learnedLimit,
  newOrg,
  orgLimit,
  pacingAt,
  peekPace,
  peekScope,
  release as modelRelease,
  settle as modelSettle,
  tokenLimit,
  windowViolation,
  type Fallbacks,
  type OrgModel,
  type PermitTruth,
  type Scope,
} from './limiter-model.ts';
import {
  bucketViolation,
  burstMalformed,
  fmt3,
  parseOpen,
  type PaceModelView,
  type Stretch,
} from './limiter-pace.ts';
import { agree, compareState } from './limiter-state.ts';

/** Fixed in CI; TEST_SEED replays a failure fast-check reported. */
const SEED = process.env.TEST_SEED ? Number(process.env.TEST_SEED) : 20261126;
const PATH = process.env.TEST_PATH;
const RUNS = Number(process.env.TEST_RUNS ?? 300);

const prefix = randomPrefix('model-limiter');
const redis = newRedis();
const clock = new SteppedClock(1_800_000_000_000);
installSteppedClock(redis, clock);

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
});

const WHO = 'model-test';

const rateOf = ([max, w]: [number, number]): Rate => ({ max, windowMs: WINDOWS[w] as number });

let runs = 0;
/** What the runs exercised, across all of them: a property that never met a full window proves nothing. */
const seen = new Map<string, number>();
const tally = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1);

/** What a run holds: the budget under test, the model beside it, and what the checks keep between commands. */
interface Run {
  s: Setup;
  fb: Fallbacks;
  /** The fallbacks as limits set/reset take them (reset writes the fallback burst, or removes the burst). */
  fallback: FallbackLimits;
  budget: TransferBudget;
  orgs: [OrgModel, OrgModel];
  permits: PermitTruth[];
  /** The grants of each scope since its pacing last changed ('<org> org', '<org> tok:<id>'). */
  stretches: Map<string, Stretch>;
  /** Per organization: the buckets found not full at a refusal outside its run window, since. */
  shortWhileClosed: Map<string, Set<string>>;
  /** What onMalformedPolicy was told during the acquire being checked. */
  named: Array<{ org: string; fields: Array<{ field: string; value: string }> }>;
}

/** One run: a fresh pair of organizations, the commands in order, every check after each. */
async function run(s: Setup, cmds: Cmd[]): Promise<void> {
  const n = ++runs;
  const fb: Fallbacks = {
    token: rateOf(s.token),
    org: rateOf(s.org),
    burst: s.burst ? encodeBurst(s.burst) : '',
  };
  const fallback: FallbackLimits = {
    limitPerToken: fb.token,
    limitPerOrg: fb.org,
    ...(s.burst ? { burst: s.burst } : {}),
  };
  const named: Run['named'] = [];
  const budget = new TransferBudget(redis, {
    prefix,
    ...fallback,
    inflightTtlMs: s.inflightTtlMs,
    onMalformedPolicy: (org, fields) => void named.push({ org, fields: [...fields] }),
  });
  const r: Run = {
    s,
    fb,
    fallback,
    budget,
    orgs: [newOrg(`m${n}a`, TOKENS), newOrg(`m${n}b`, TOKENS)],
    permits: [],
    stretches: new Map(),
    shortWhileClosed: new Map(),
    named,
  };
  for (const [i, cmd] of cmds.entries()) {
    const step = `step ${i} ${JSON.stringify(cmd)} at ${clock.now}`;
    if (await runCommand(r, step, cmd)) await compareState(redis, budget.keys, r.orgs, step);
  }
}

/**
 * Runs one command on both sides; false when it wrote nothing to compare: a clock step, a peek (it runs
 * with no-writes: Redis refuses a write), or a settle, abandon, release or learn with no permit to take.
 */
async function runCommand(r: Run, step: string, cmd: Cmd): Promise<boolean> {
  const { budget, permits, orgs } = r;
  const keys = budget.keys;
  const eligible = {
    settle: (p: PermitTruth) => !p.released,
    abandon: (p: PermitTruth) => !p.released && p.respondedAt === null,
    release: (p: PermitTruth) => !p.released && p.respondedAt === null && !p.abandoned,
    learn: (p: PermitTruth) => p.respondedAt !== null,
  };
  const choose = (kind: keyof typeof eligible, i: number) => {
    const list = permits.filter(eligible[kind]);
    return list.length === 0 ? null : (list[i % list.length] as PermitTruth);
  };
  const orgOf = (p: PermitTruth) => orgs.find((o) => o.name === p.org) as OrgModel;
  switch (cmd.c) {
    case 'acquire':
      await acquireStep(r, step, orgs[cmd.org], cmd.pool);
      return true;
    case 'peek':
      await peekStep(r, step, orgs[cmd.org], cmd.pool);
      return false;
    case 'settle':
    case 'abandon':
    case 'release': {
      const p = choose(cmd.c, cmd.pick);
      if (!p) return false;
      const o = orgOf(p);
      if (cmd.c === 'settle') {
        await budget.settle(p.org, p.token, p.id);
        modelSettle(o, p.token, p.id, 'response', clock.now);
        tally(clock.now > p.deadline ? 'settled after the deadline' : 'settled');
        p.respondedAt ??= clock.now;
      } else if (cmd.c === 'abandon') {
        await budget.abandon(p.org, p.token, p.id);
        modelSettle(o, p.token, p.id, 'abandon', clock.now);
        tally(clock.now > p.deadline ? 'abandoned after the deadline' : 'abandoned');
        p.abandoned = true;
      } else {
        await budget.release(p.org, p.token, p.id);
        modelRelease(o, p.token, p.id);
        tally(o.org.log.has(p.id) ? 'released after the deadline (stays counted)' : 'released');
        p.released = true;
      }
      return true;
    }
    case 'learn': {
      const p = choose('learn', cmd.pick);
      if (!p) return false;
      const o = orgOf(p);
      const l = configuredLimits(o, r.fb.token, r.fb.org);
      const tok = tokenLimit(o, l, p.token, clock.now);
      const org = orgLimit(o, l, clock.now);
      const res = await budget.learn(p.org, p.token, p.id, TOKENS.length);
      if (res.cause !== 'repeat') {
        agree(step, 'limits in force learn.lua saw', [res.token.limit, res.org.limit], [tok.max, org.max]);
      }
      const stored = await redis.hmget(keys.policy(p.org), `learned:tok:${p.token}`, 'learned:org');
      for (const [field, learned, inForce, configured, value] of [
        [`learned:tok:${p.token}`, res.token.learned, tok.max, tok.configured, stored[0]],
        ['learned:org', res.org.learned, org.max, Math.max(0, l.orgUsable), stored[1]],
      ] as const) {
        if (learned === null) continue;
        // Learning never raises a limit: at most the limit in force, below the configured one, at least 1.
        if (!(learned >= 1 && learned <= inForce && learned < configured)) {
          throw new Error(
            `${step}: learned ${field} = ${learned}, limit in force ${inForce}, configured ${configured}`,
          );
        }
        agree(step, field, value, `${learned} ${clock.now}`);
        o.policy.set(field, value as string);
        tally(`learned ${field.startsWith('learned:org') ? 'an organization' : 'a token'} limit`);
      }
      return true;
    }
    case 'tick':
      clock.set(clock.now + cmd.ms);
      return false;
    case 'edge': {
      const edges = edgesAfter(r.orgs, r.fb, clock.now, WINDOWS[0] as number);
      const to = edges.length === 0 ? undefined : edges[cmd.pick % edges.length];
      if (to !== undefined) clock.set(to);
      return false;
    }
    default:
      await policyCommand(r, cmd);
      return true;
  }
}

/** The commands that change an organization's policy: as `limits`, `pause` and the blocks do, or by hand. */
async function policyCommand(r: Run, cmd: Cmd): Promise<void> {
  const keys = r.budget.keys;
  const { fallback, fb } = r;
  switch (cmd.c) {
    case 'limits': {
      const o = r.orgs[cmd.org];
      const change: LimitChange = {};
      if (cmd.perOrg) change.perOrg = rateOf(cmd.perOrg);
      if (cmd.perToken) {
        change.perToken = rateOf(cmd.perToken);
        if (cmd.token !== undefined) change.tokenId = TOKENS[cmd.token];
      }
      if (!change.perOrg && !change.perToken) return;
      await setLimits(redis, keys, o.name, change, fallback, WHO);
      if (change.perOrg) o.policy.set('org', encodeRate(change.perOrg));
      if (change.perToken)
        o.policy.set(change.tokenId ? `tok:${change.tokenId}` : 'token', encodeRate(change.perToken));
      // change-policy.lua: a new org limit re-resolves a reserve given as a share.
      const share = o.policy.get('reserveShare');
      if (change.perOrg && share !== undefined) resolveShare(o, Number(share), fb.org);
      return;
    }
    case 'reserve': {
      const o = r.orgs[cmd.org];
      if (cmd.count !== undefined) {
        await setLimits(redis, keys, o.name, { reserve: { count: cmd.count } }, fallback, WHO);
        o.policy.set('reserve', String(cmd.count));
        o.policy.delete('reserveShare');
      } else {
        const share = cmd.share ?? 0;
        await setLimits(redis, keys, o.name, { reserve: { share } }, fallback, WHO);
        resolveShare(o, share, fb.org);
      }
      return;
    }
    case 'reset': {
      const o = r.orgs[cmd.org];
      await resetLimits(redis, keys, o.name, fallback, WHO);
      for (const f of [...o.policy.keys()]) {
        if (/^(tok:|learned:|reserve$|reserveShare$)/.test(f)) o.policy.delete(f);
      }
      o.policy.set('org', encodeRate(fb.org));
      o.policy.set('token', encodeRate(fb.token));
      // The fallback burst is written (LIMIT_BURST), or the stored one removed; the run window stays.
      if (fb.burst !== '') o.policy.set('burst', fb.burst);
      else o.policy.delete('burst');
      return;
    }
    case 'pause': {
      const o = r.orgs[cmd.org];
      const token = cmd.token === null ? null : (TOKENS[cmd.token] as string);
      await setPaused(redis, keys, o.name, token, cmd.on, WHO);
      const field = token === null ? 'paused' : `paused:${token}`;
      if (cmd.on) o.policy.set(field, 'paused');
      else o.policy.delete(field);
      return;
    }
    case 'block': {
      const o = r.orgs[cmd.org];
      const token = cmd.token === null ? null : (TOKENS[cmd.token] as string);
      if (cmd.on) await r.budget.block(o.name, token, 'indefinite', '401');
      else await r.budget.unblock(o.name, token);
      if (token === null) o.orgBlocked = cmd.on;
      else if (cmd.on) o.tokenBlocked.add(token);
      else o.tokenBlocked.delete(token);
      return;
    }
    case 'burst': {
      const o = r.orgs[cmd.org];
      await setLimits(redis, keys, o.name, { burst: cmd.burst }, fallback, WHO);
      o.policy.set('burst', encodeBurst(cmd.burst));
      return;
    }
    case 'burstRaw': {
      const o = r.orgs[cmd.org];
      await setRaw(o, keys.policy(o.name), 'burst', cmd.value);
      return;
    }
    case 'open': {
      const o = r.orgs[cmd.org];
      let value: string | null = null;
      if (cmd.intervals !== null) {
        const at = clock.now;
        const last = cmd.intervals.at(-1)?.[1] ?? 0;
        const horizon =
          at + (cmd.horizonIn === FAR_HORIZON_MS ? FAR_HORIZON_MS : Math.max(0, last) + cmd.horizonIn);
        value = [horizon, ...cmd.intervals.flatMap(([s, e]) => [at + s, at + e])].join(' ');
      }
      await setRaw(o, keys.policy(o.name), 'open', value);
      return;
    }
  }
}

/** A policy field written by hand (HSET; null: HDEL), in Redis and in the model. */
async function setRaw(o: OrgModel, key: string, field: string, value: string | null): Promise<void> {
  if (value === null) {
    await redis.hdel(key, field);
    o.policy.delete(field);
  } else {
    await redis.hset(key, field, value);
    o.policy.set(field, value);
  }
}

/** An acquire on the real budget and on the model: the answer, what it named, and the two bounds. */
async function acquireStep(r: Run, step: string, o: OrgModel, pool: number[]): Promise<void> {
  const ids = pool.map((t) => TOKENS[t] as string);
  r.named.length = 0;
  const real = await r.budget.acquire(o.name, ids);
  agree(step, 'acquire time', real.now, clock.now);
  const now = clock.now;
  const learnedBefore = [...o.policy.keys()].filter((f) => f.startsWith('learned:')).length;
  const tatsBefore = new Map(o.pace);
  const predict = () =>
    modelAcquire(o, ids, r.fb, r.s.inflightTtlMs, now, () => (real.ok ? real.permitId : 'no-permit'));
  let prediction = predict();
  let attempts = 1;
  if (!prediction.ok && prediction.scope === 'run-window-stale') {
    // TransferBudget wrote the run window again from the calendar: none is stored, so `open` is gone.
    o.policy.delete('open');
    attempts = 2;
    tally('a stale run window refreshed away, then asked again');
    prediction = predict();
  }
  const burst = o.policy.get('burst');
  if (burst !== undefined && burstMalformed(burst)) {
    const fields = [{ field: 'burst', value: burst }];
    agree(step, 'malformed fields named', r.named, Array(attempts).fill({ org: o.name, fields }));
    tally('a malformed burst ignored and named');
  } else agree(step, 'malformed fields named', r.named, []);
  if ([...o.policy.keys()].filter((f) => f.startsWith('learned:')).length < learnedBefore) {
    tally('a learned limit probed back up to the configured one');
  }
  if (!real.ok) {
    const { waitMs, scope, allBlockedIndefinitely } = real;
    agree(step, 'acquire', { ok: false, scope, waitMs, allBlockedIndefinitely }, prediction);
    tally(`refused: ${scope}`);
    if (scope === 'run-window') closedRefusal(r, o, now, waitMs);
    return;
  }
  agree(
    step,
    'acquire',
    { ok: true, token: real.tokenId },
    prediction.ok ? { ok: true, token: prediction.token } : prediction,
  );
  const stamp = `${now}.${String(clock.lastMicros).padStart(3, '0')}-`;
  if (!real.permitId.startsWith(stamp))
    throw new Error(`${step}: permit id ${real.permitId}, expected ${stamp}...`);
  const p: PermitTruth = {
    id: real.permitId,
    org: o.name,
    token: real.tokenId,
    acquiredAt: real.now,
    deadline: real.now + r.s.inflightTtlMs,
    released: false,
    respondedAt: null,
    abandoned: false,
  };
  r.permits.push(p);
  const b = boundsAt(o, p.token, r.fb.token, r.fb.org, now);
  const byToken = windowViolation(
    r.permits,
    p,
    (q) => q.org === p.org && q.token === p.token,
    b.token,
    `token ${p.token} of ${p.org}`,
  );
  const byOrg = windowViolation(r.permits, p, (q) => q.org === p.org, b.org, `organization ${p.org}`);
  const bad = byToken.violation ?? byOrg.violation;
  if (bad) throw new Error(`${step}: ${bad}`);
  tally('granted');
  if (byToken.count === b.token.max) tally('granted the last permit of a token window');
  if (byOrg.count === b.org.max) tally('granted the last permit of an organization window');
  checkBuckets(r, step, o, p.token, now);
  grantedInRunWindow(r, o, p.token, now, tatsBefore);
}

/** The bucket bound of the organization's and the token's bucket, for a grant at `now`. */
function checkBuckets(r: Run, step: string, o: OrgModel, token: string, now: number): void {
  const pacing = pacingAt(o, token, r.fb, now);
  for (const [key, params] of [
    [`${o.name} org`, pacing.org],
    [`${o.name} tok:${token}`, pacing.token],
  ] as const) {
    const b = bucketViolation(r.stretches.get(key), params, now, `the bucket of ${key}`);
    if (b.violation) throw new Error(`${step}: ${b.violation}`);
    if (b.stretch) r.stretches.set(key, b.stretch);
    else r.stretches.delete(key);
    if (b.tight) tally('a bucket granted all its bound allows');
  }
}

/** A refusal outside the run window: its edges, and the buckets that are to refill while it is closed. */
function closedRefusal(r: Run, o: OrgModel, now: number, waitMs: number): void {
  const { horizon, intervals } = parseOpen(o.policy.get('open') ?? '');
  if (intervals.some(([, e]) => e === now)) tally('refused: run-window at the end of an open interval');
  if (horizon !== null && waitMs === horizon - now) tally('refused: run-window until the horizon');
  const short = r.shortWhileClosed.get(o.name) ?? new Set<string>();
  for (const [field, tat] of o.pace) if (tat > now) short.add(field);
  r.shortWhileClosed.set(o.name, short);
}

/** A grant under a run window: at its edges, or from a bucket that refilled while it was closed. */
function grantedInRunWindow(
  r: Run,
  o: OrgModel,
  token: string,
  now: number,
  tatsBefore: ReadonlyMap<string, number>,
): void {
  for (const [s, e] of parseOpen(o.policy.get('open') ?? '').intervals) {
    if (now === s) tally('granted at the first ms of an open interval');
    if (now === e - 1) tally('granted at the last ms of an open interval');
  }
  const short = r.shortWhileClosed.get(o.name);
  for (const field of ['org', `tok:${token}`]) {
    const before = tatsBefore.get(field);
    // Not full at a closed refusal, full now, and paced by this grant (its tat moved).
    if (short?.has(field) && before !== undefined && before <= now && o.pace.get(field) !== before) {
      tally('granted from a bucket that refilled while the run window was closed');
    }
    short?.delete(field);
  }
}

/** A peek against the model: the windows and, where a scope paces, its bucket. */
async function peekStep(r: Run, step: string, o: OrgModel, pool: number[]): Promise<void> {
  const ids = pool.map((t) => TOKENS[t] as string);
  const view = await r.budget.peek(o.name, ids);
  const now = clock.now;
  agree(step, 'peek time', view.now, now);
  const l = configuredLimits(o, r.fb.token, r.fb.org);
  const orgMax = learnedLimit(
    o.policy.get('learned:org'),
    Math.max(0, l.orgUsable),
    l.org.max,
    l.org.windowMs,
    now,
  ).limit;
  const show = (v: {
    used: number;
    inflight: number;
    nextFreeInMs: number;
    limit: number;
    windowMs: number;
    pace?: PaceModelView | null | undefined;
  }) => ({
    used: v.used,
    inflight: v.inflight,
    nextFreeInMs: v.nextFreeInMs,
    limit: v.limit,
    windowMs: v.windowMs,
    pace: v.pace
      ? {
          burst: v.pace.burst,
          available: v.pace.available,
          nextInMs: v.pace.nextInMs,
          intervalMs: v.pace.intervalMs,
          tatInMs: v.pace.tatInMs,
        }
      : null,
  });
  const model = [
    {
      ...peekScope(o.org, orgMax, l.org.windowMs, now),
      limit: orgMax,
      windowMs: l.org.windowMs,
      pace: peekPace(o, r.fb, 'org', orgMax, l.org.windowMs, now),
    },
    ...ids.map((t) => {
      const tl = tokenLimit(o, l, t, now);
      return {
        ...peekScope(o.tok.get(t) as Scope, tl.max, tl.windowMs, now),
        limit: tl.max,
        windowMs: tl.windowMs,
        pace: peekPace(o, r.fb, `tok:${t}`, tl.max, tl.windowMs, now),
      };
    }),
  ].map(show);
  const real = [view.org, ...view.tokens].map(show);
  // A tat is compared as a number, to the µs it is stored with.
  for (const [i, m] of model.entries()) {
    const rp = real[i]?.pace;
    if (rp && m.pace && Math.abs(rp.tatInMs - m.pace.tatInMs) <= 1e-3) rp.tatInMs = m.pace.tatInMs;
  }
  agree(step, 'peek', real, model);
  if (model.some((v) => v.pace !== null)) tally('peeked at a bucket');
  if (model.some((v) => v.pace?.available === 0)) tally('peeked at an empty bucket');
}

/** change-policy.lua: reserve = ceil(org max * share / 100), the org max stored or the fallback's. */
function resolveShare(o: OrgModel, share: number, fallbackOrg: Rate): void {
  const max = Number(/^(\d+)\//.exec(o.policy.get('org') ?? encodeRate(fallbackOrg))?.[1] ?? 0);
  o.policy.set('reserve', String(Math.ceil((max * share) / 100 - 1e-9)));
  o.policy.set('reserveShare', String(share));
}

describe('the limiter against a model of its windows', () => {
  it('runs every script that reads the time through the one clock part, and the stepped clock only here', () => {
    expect(PRODUCTION_CLOCK).toMatch(/redis\.call\('TIME'\)/);
    const code = (lua: string) => lua.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--[^\n]*/g, '');
    const readers = LIMITER_SCRIPTS.all.filter((s) => /redis\.call\('TIME'\)/.test(code(s.lua)));
    expect(readers.map((s) => s.name).sort()).toEqual(['acquire', 'learn', 'peek', 'peek-frees', 'settle']);
    for (const s of readers) {
      expect(s.includes).toContain('clock');
      expect(code(s.lua.split(PRODUCTION_CLOCK).join(''))).not.toMatch(/TIME/);
      expect(s.lua).not.toMatch(/ARGV\[#ARGV\]/);
    }
  });

  it('has the production clock part read Redis TIME: whole ms, and the µs within that ms', async () => {
    const ms = async () => {
      const [sec, micros] = await redis.time();
      return Number(sec) * 1000 + Math.floor(Number(micros) / 1000);
    };
    const before = await ms();
    const [now, micros] = (await redis.eval(`${PRODUCTION_CLOCK}\nreturn {lt_now()}`, 0)) as [number, number];
    const after = await ms();
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(after);
    expect(Number.isInteger(micros) && micros >= 0 && micros < 1000, `µs ${micros}`).toBe(true);
  });

  it("has the model store a tat as the scripts do: C's %.3f, a tie to the even digit", async () => {
    // Ties (x.0625...: multiples of 2^-12 near 1.8e12 hit them), their neighbours, and tats as they come.
    const base = 1_800_000_000_000;
    const values = [0, 0.0625, 0.1875, 0.3125, 0.5625, 2.0005, 666.6666666666666, 4999.9995];
    for (let j = 1; j < 16; j += 2)
      values.push(base + j / 16, base + j / 16 + 2 ** -12, base + j / 16 - 2 ** -12);
    for (let t = base, i = 0; i < 50; i++) values.push((t = Number(fmt3(t + 2000 / 3))) + 5000 / 7);
    const lua =
      "local out = {} for i = 1, #ARGV do out[i] = string.format('%.3f', tonumber(ARGV[i])) end return out";
    const real = (await redis.eval(lua, 0, ...values.map(String))) as string[];
    expect(values.map(fmt3)).toEqual(real);
  });

  it('grants no more than the limit in any window, loses no permit, and answers as the model does', async () => {
    await fc.assert(
      fc.asyncProperty(setup, fc.array(command, { minLength: 1, maxLength: 60, size: 'max' }), run),
      {
        seed: SEED,
        numRuns: RUNS,
        examples: EXAMPLES,
        ...(PATH ? { path: PATH } : {}),
      },
    );
    // Something was at stake: every kind of answer and every edge the checks are about was met.
    const needed = [
      'granted',
      'granted the last permit of a token window',
      'granted the last permit of an organization window',
      'refused: token',
      'refused: org',
      'refused: paused',
      'refused: blocked-token',
      'refused: blocked-org',
      'settled',
      'settled after the deadline',
      'abandoned',
      'abandoned after the deadline',
      'released',
      'released after the deadline (stays counted)',
      'learned a token limit',
      'a learned limit probed back up to the configured one',
      'refused: pace',
      'refused: run-window',
      'refused: run-window at the end of an open interval',
      'refused: run-window until the horizon',
      'granted at the first ms of an open interval',
      'granted at the last ms of an open interval',
      'granted from a bucket that refilled while the run window was closed',
      'a bucket granted all its bound allows',
      'a malformed burst ignored and named',
      'a stale run window refreshed away, then asked again',
      'peeked at an empty bucket',
    ];
    const tallies = JSON.stringify(Object.fromEntries(seen));
    for (const what of needed) expect(seen.get(what) ?? 0, `${what}: ${tallies}`).toBeGreaterThan(0);
  }, 120_000);
});
