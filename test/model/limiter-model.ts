// A small reference model of the limiter's windows (src/limiter/acquire.lua and its kin), in plain
// TypeScript with no Redis: per scope (an organization, one token of it) the permits in flight
// (id -> deadline) and the log (id -> the time it counts until), the live policy fields acquire reads,
// and the blocks. limiter.model.test.ts runs the real TransferBudget and this side by side and compares
// every answer and every sorted set. Pacing and the run window (limiter-pace.ts) are modelled exactly too:
// the tats of the pace hash and every wait and scope they cause.
//
// Separate from it, and not derived from its counts: the window bound. Each granted permit keeps the
// interval in which the service may have counted it (acquire .. the earliest of its deadline and its
// first response: the premise of acquire.lua's proof) and windowViolation() checks, for the permit just
// granted, that no window of the service can hold more than the limit in force.

import {
  allowedFrom,
  bucketView,
  burstSize,
  burstSpec,
  pace,
  parseOpen,
  runWindowWait,
  stored3,
  type PaceModelView,
  type PaceParams,
} from './limiter-pace.ts';

export interface Rate {
  max: number;
  windowMs: number;
}

export interface Scope {
  /** permit id -> in-flight deadline (ms) */
  inflight: Map<string, number>;
  /** permit id -> the time the permit counts until (ms) */
  log: Map<string, number>;
  /** The window of the last acquire that refreshed this scope, and since when it has been that. */
  window: number | null;
  windowSince: number;
}

export interface PermitTruth {
  id: string;
  org: string;
  token: string;
  acquiredAt: number;
  deadline: number;
  /** Never sent, budget returned: the service never counted it. */
  released: boolean;
  /** First response (settle), if any: the service counted the request before it. */
  respondedAt: number | null;
  abandoned: boolean;
}

export interface OrgModel {
  name: string;
  tokens: string[];
  policy: Map<string, string>;
  /** The pace hash: 'org' and 'tok:<id>' -> tat, as stored ("%.3f" read back). */
  pace: Map<string, number>;
  orgBlocked: boolean;
  tokenBlocked: Set<string>;
  org: Scope;
  tok: Map<string, Scope>;
}

export type Prediction =
  | { ok: true; token: string; deadline: number }
  | { ok: false; scope: string; waitMs: number; allBlockedIndefinitely: boolean };

/** What acquire is given besides the organization: the fallbacks of TransferBudget's options (ARGV). */
export interface Fallbacks {
  token: Rate;
  org: Rate;
  /** The fallback burst as the scripts get it ('' = none). */
  burst: string;
}

/** What a scope's limit was at a grant, for the window bound. */
export interface Bound {
  max: number;
  windowMs: number;
  since: number;
}

const RATE_RE = /^(\d+)\/(\d+)$/;
const LEARNED_RE = /^(\d+) (\d+)$/;

export function newScope(): Scope {
  return { inflight: new Map(), log: new Map(), window: null, windowSince: 0 };
}

export function newOrg(name: string, tokens: string[]): OrgModel {
  return {
    name,
    tokens,
    policy: new Map(),
    pace: new Map(),
    orgBlocked: false,
    tokenBlocked: new Set(),
    org: newScope(),
    tok: new Map(tokens.map((t) => [t, newScope()])),
  };
}

export function encodeRate(r: Rate): string {
  return `${r.max}/${r.windowMs}`;
}

/** includes/policy.lua lt_rate: the field, or the fallback when absent (the model writes no bad ones). */
function rate(policy: Map<string, string>, field: string, fallback: Rate): Rate {
  const m = RATE_RE.exec(policy.get(field) ?? '');
  return m ? { max: Number(m[1]), windowMs: Number(m[2]) } : fallback;
}

/**
 * includes/policy.lua lt_learned: the limit in force under a learned entry at `now`, and whether the
 * entry no longer holds (probed back up to `limit`: acquire deletes it then).
 */
export function learnedLimit(
  value: string | undefined,
  limit: number,
  configured: number,
  windowMs: number,
  now: number,
): { limit: number; spent: boolean } {
  if (value === undefined || limit <= 0) return { limit, spent: false };
  const m = LEARNED_RE.exec(value);
  if (!m) return { limit, spent: true };
  const every = Math.max(windowMs, Math.min(4 * windowMs, 3_600_000));
  const step = Math.max(1, Math.floor(configured / 20));
  const steps = Math.floor(Math.max(0, now - Number(m[2])) / every);
  const v = Number(m[1]) + step * steps;
  if (v >= limit) return { limit, spent: true };
  return { limit: Math.max(1, v), spent: false };
}

export interface Limits {
  tokenDefault: Rate;
  org: Rate;
  /** org max less the reserve (may be <= 0: nothing is granted) */
  orgUsable: number;
  reserve: number;
}

export function configuredLimits(o: OrgModel, fallbackToken: Rate, fallbackOrg: Rate): Limits {
  const tokenDefault = rate(o.policy, 'token', fallbackToken);
  const org = rate(o.policy, 'org', fallbackOrg);
  const reserve = Math.max(0, Number(o.policy.get('reserve') ?? 0) || 0);
  return { tokenDefault, org, reserve, orgUsable: org.max - reserve };
}

/** The organization's limit in force (reserve and learned limit applied) and its window. */
export function orgLimit(
  o: OrgModel,
  l: Limits,
  now: number,
): { max: number; windowMs: number; spent: boolean } {
  const r = learnedLimit(o.policy.get('learned:org'), l.orgUsable, l.org.max, l.org.windowMs, now);
  return { max: r.limit, windowMs: l.org.windowMs, spent: r.spent };
}

/** One token's limit in force (its own limit or the default, learned limit applied). */
export function tokenLimit(
  o: OrgModel,
  l: Limits,
  token: string,
  now: number,
): { max: number; windowMs: number; configured: number; spent: boolean } {
  const r = rate(o.policy, `tok:${token}`, l.tokenDefault);
  const learned = learnedLimit(o.policy.get(`learned:tok:${token}`), r.max, r.max, r.windowMs, now);
  return { max: learned.limit, windowMs: r.windowMs, configured: r.max, spent: learned.spent };
}

/** acquire.lua refresh(): expired in-flight permits into the log at their deadline, then the trim. */
function refresh(s: Scope, windowMs: number, now: number): { log: number; inflight: number } {
  for (const [id, deadline] of [...s.inflight]) {
    if (deadline > now) continue;
    s.log.set(id, Math.max(s.log.get(id) ?? -Infinity, deadline));
    s.inflight.delete(id);
  }
  for (const [id, score] of [...s.log]) if (score < now - windowMs) s.log.delete(id);
  if (s.window !== windowMs) {
    s.window = windowMs;
    s.windowSince = now;
  }
  return { log: s.log.size, inflight: s.inflight.size };
}

/** acquire.lua windowWait(): ms until the scope can hold one more (0: room now). */
function windowWait(s: Scope, max: number, windowMs: number, now: number): number {
  const k = s.log.size + s.inflight.size - max + 1;
  if (k <= 0) return 0;
  if (k <= s.log.size) {
    const scores = [...s.log.values()].sort((a, b) => a - b);
    return (scores[k - 1] as number) + windowMs + 1 - now;
  }
  return windowMs + 1;
}

/** The burst in force for the organization (lt_burst_spec): its valid stored burst, or the fallback. */
export function burstInForce(o: OrgModel, fb: Fallbacks): string {
  return burstSpec(o.policy.get('burst'), fb.burst);
}

/** A scope's pacing under `spec` for a limit in force of `max` per `windowMs` (null: it does not pace). */
export function paceParams(spec: string, max: number, windowMs: number): PaceParams | null {
  const burst = max > 0 ? burstSize(spec, max) : null;
  return burst === null ? null : { burst, intervalMs: windowMs / max };
}

/** acquire.lua paceOf(): the scope's bucket at `now` (wait 0 and tat null when it does not pace). */
function paceOf(
  o: OrgModel,
  spec: string,
  field: string,
  max: number,
  windowMs: number,
  now: number,
): { waitMs: number; tat: number | null } {
  const p = paceParams(spec, max, windowMs);
  if (p === null) return { waitMs: 0, tat: null };
  return pace(o.pace.get(field), now, max, windowMs, p.burst);
}

/**
 * One acquire on `pool` at `now`, as acquire.lua decides it (no lease; blocks only until unblock: a
 * block with a Retry-After expires on the host's clock, which this model does not step). Applies its
 * writes to the model: refreshes, forgotten learned limits and, when granted, the permit in flight and
 * the tats of the buckets it came out of. 'run-window-stale' is the script's answer before TransferBudget
 * refreshes the run window and asks again.
 */
export function acquire(
  o: OrgModel,
  pool: readonly string[],
  fb: Fallbacks,
  inflightTtlMs: number,
  now: number,
  permitId: () => string,
): Prediction {
  const l = configuredLimits(o, fb.token, fb.org);
  const org = orgLimit(o, l, now);
  if (org.spent && l.orgUsable > 0) o.policy.delete('learned:org');
  const spec = burstInForce(o, fb);
  if (o.policy.has('paused')) {
    return { ok: false, scope: 'paused', waitMs: l.org.windowMs, allBlockedIndefinitely: true };
  }
  const open = o.policy.get('open');
  const closed = open === undefined ? 0 : runWindowWait(open, now);
  if (closed < 0) return { ok: false, scope: 'run-window-stale', waitMs: 1, allBlockedIndefinitely: false };
  if (closed > 0) return { ok: false, scope: 'run-window', waitMs: closed, allBlockedIndefinitely: false };
  if (o.orgBlocked) {
    return { ok: false, scope: 'blocked-org', waitMs: l.org.windowMs, allBlockedIndefinitely: true };
  }
  refresh(o.org, org.windowMs, now);
  const orgWait = windowWait(o.org, org.max, org.windowMs, now);
  const orgPace = paceOf(o, spec, 'org', org.max, org.windowMs, now);
  let best: string | null = null;
  let bestRemaining = 0;
  let anyUsable = false;
  let anyPaused = false;
  const seen: Array<{
    token: string;
    max: number;
    windowMs: number;
    usable: boolean;
    pace: { waitMs: number; tat: number | null };
  }> = [];
  for (const token of pool) {
    const t = tokenLimit(o, l, token, now);
    if (t.spent && t.max > 0) o.policy.delete(`learned:tok:${token}`);
    const paused = o.policy.has(`paused:${token}`);
    const blocked = o.tokenBlocked.has(token);
    const s = o.tok.get(token) as Scope;
    const c = refresh(s, t.windowMs, now);
    const tp = paceOf(o, spec, `tok:${token}`, t.max, t.windowMs, now);
    if (paused) anyPaused = true;
    else if (!blocked) anyUsable = true;
    const remaining = t.max - c.log - c.inflight;
    if (!paused && !blocked && tp.waitMs === 0 && remaining > bestRemaining) {
      best = token;
      bestRemaining = remaining;
    }
    seen.push({ token, max: t.max, windowMs: t.windowMs, usable: !paused && !blocked, pace: tp });
  }
  if (orgWait === 0 && orgPace.waitMs === 0 && best !== null) {
    const deadline = now + inflightTtlMs;
    const id = permitId();
    (o.tok.get(best) as Scope).inflight.set(id, deadline);
    o.org.inflight.set(id, deadline);
    const bestTat = seen.find((t) => t.token === best)?.pace.tat ?? null;
    if (orgPace.tat !== null) o.pace.set('org', stored3(orgPace.tat));
    if (bestTat !== null) o.pace.set(`tok:${best}`, stored3(bestTat));
    return { ok: true, token: best, deadline };
  }
  if (!anyUsable) {
    return {
      ok: false,
      scope: anyPaused ? 'paused' : 'blocked-token',
      waitMs: l.tokenDefault.windowMs,
      allBlockedIndefinitely: true,
    };
  }
  // Per token the later of its window and its bucket; the earliest token; then the organization's.
  let tokenWait = -1;
  let tokenScope = 'token';
  for (const t of seen) {
    if (!t.usable) continue;
    let w = windowWait(o.tok.get(t.token) as Scope, t.max, t.windowMs, now);
    let scope = 'token';
    if (t.pace.waitMs > w) {
      w = t.pace.waitMs;
      scope = 'pace';
    }
    if (tokenWait < 0 || w < tokenWait) {
      tokenWait = w;
      tokenScope = scope;
    }
  }
  let orgScope = 'org';
  let orgAll = orgWait;
  if (orgPace.waitMs > orgAll) {
    orgAll = orgPace.waitMs;
    orgScope = 'pace';
  }
  if (orgAll > 0 && orgAll >= tokenWait) {
    return { ok: false, scope: orgScope, waitMs: Math.max(1, orgAll), allBlockedIndefinitely: false };
  }
  return { ok: false, scope: tokenScope, waitMs: Math.max(1, tokenWait), allBlockedIndefinitely: false };
}

/** The pacing of the organization and of `token` now (after the acquire's refresh): what the bucket bound holds. */
export function pacingAt(
  o: OrgModel,
  token: string,
  fb: Fallbacks,
  now: number,
): { token: PaceParams | null; org: PaceParams | null } {
  const spec = burstInForce(o, fb);
  const l = configuredLimits(o, fb.token, fb.org);
  const t = tokenLimit(o, l, token, now);
  const org = orgLimit(o, l, now);
  return { token: paceParams(spec, t.max, t.windowMs), org: paceParams(spec, org.max, org.windowMs) };
}

/** peek.lua bucket(): a scope's PaceView, or null when it does not pace. */
export function peekPace(
  o: OrgModel,
  fb: Fallbacks,
  field: string,
  max: number,
  windowMs: number,
  now: number,
): PaceModelView | null {
  const p = paceParams(burstInForce(o, fb), max, windowMs);
  return p === null ? null : bucketView(o.pace.get(field), now, max, windowMs, p.burst);
}

/**
 * The limits in force for a permit granted now on `token` (read after the acquire's refresh), and since
 * when each scope has had its window: what the window bound holds the grant to.
 */
export function boundsAt(
  o: OrgModel,
  token: string,
  fallbackToken: Rate,
  fallbackOrg: Rate,
  now: number,
): { token: Bound; org: Bound } {
  const l = configuredLimits(o, fallbackToken, fallbackOrg);
  const t = tokenLimit(o, l, token, now);
  const org = orgLimit(o, l, now);
  return {
    token: { max: t.max, windowMs: t.windowMs, since: (o.tok.get(token) as Scope).windowSince },
    org: { max: org.max, windowMs: org.windowMs, since: o.org.windowSince },
  };
}

/** settle.lua on one scope: a response stamps now; an abandon stamps max(now, deadline) if in flight. */
function settleScope(s: Scope, id: string, mode: 'response' | 'abandon', now: number): void {
  const deadline = s.inflight.get(id);
  if (mode === 'abandon' && deadline === undefined) return;
  const score = mode === 'abandon' ? Math.max(now, deadline as number) : now;
  s.inflight.delete(id);
  s.log.set(id, Math.max(s.log.get(id) ?? -Infinity, score));
}

export function settle(
  o: OrgModel,
  token: string,
  id: string,
  mode: 'response' | 'abandon',
  now: number,
): void {
  settleScope(o.tok.get(token) as Scope, id, mode, now);
  settleScope(o.org, id, mode, now);
}

/** release.lua: out of flight in both scopes; a permit already moved to a log stays there. */
export function release(o: OrgModel, token: string, id: string): void {
  (o.tok.get(token) as Scope).inflight.delete(id);
  o.org.inflight.delete(id);
}

/** What peek.lua reports for one scope (blocks and pauses aside). */
export function peekScope(
  s: Scope,
  max: number,
  windowMs: number,
  now: number,
): { used: number; inflight: number; nextFreeInMs: number } {
  const from = now - windowMs;
  const counted = [...s.log.values()].filter((v) => v >= from);
  const expired = [...s.inflight.values()].filter((d) => d >= from && d <= now);
  const used = counted.length + expired.length;
  const inflight = [...s.inflight.values()].filter((d) => d > now).length;
  const k = used + inflight - max + 1;
  let nextFreeInMs = 0;
  if (k > 0) {
    const scores = [...counted, ...expired].sort((a, b) => a - b);
    nextFreeInMs = k <= used ? (scores[k - 1] as number) + windowMs + 1 - now : windowMs + 1;
  }
  return { used, inflight, nextFreeInMs };
}

/**
 * The window bound for the permit `j` just granted in one scope: the permits of that scope acquired up
 * to it (and since the scope's window last changed: acquire.lua, "When the policy changes"), not
 * released, that the service may count inside a window [a_j - W, a_j], number at most the limit in
 * force. Exact: a window of the service that holds N+1 permits holds the last-acquired one j and every
 * other i of them with "last possible count time" >= a_j - W (any alignment, ends open or closed, whole
 * ms). Returns how many there are, and a description when they are too many.
 */
export function windowViolation(
  permits: readonly PermitTruth[],
  j: PermitTruth,
  inScope: (p: PermitTruth) => boolean,
  bound: Bound,
  label: string,
): { count: number; violation: string | null } {
  const from = j.acquiredAt - bound.windowMs;
  const lastCount = (p: PermitTruth) => Math.min(p.deadline, p.respondedAt ?? Infinity);
  const inWindow = permits.filter(
    (p) => inScope(p) && !p.released && p.acquiredAt >= bound.since && lastCount(p) >= from,
  );
  if (inWindow.length <= bound.max) return { count: inWindow.length, violation: null };
  const show = inWindow.map((p) => `${p.id.split('-')[0]}..${lastCount(p)}`);
  return {
    count: inWindow.length,
    violation:
      `${label}: ${inWindow.length} permits may be counted in the window [${from}, ${j.acquiredAt}] ` +
      `of ${bound.windowMs} ms, limit ${bound.max}: ${show.join(', ')}`,
  };
}

/**
 * The moments where an off-by-one would show: a log entry's last counted ms and the next (score + W,
 * score + W + 1), a deadline and the ms before it, and the same for an in-flight permit after it lands
 * in the log at its deadline; the first ms a bucket allows one again and the ms before, and when it is
 * full; a run window's starts and ends and the ms before each, and its horizon.
 */
export function edgesAfter(
  orgs: readonly OrgModel[],
  fb: Fallbacks,
  now: number,
  defaultWindow: number,
): number[] {
  const out = new Set<number>();
  for (const o of orgs) {
    for (const s of [o.org, ...o.tok.values()]) {
      const w = s.window ?? defaultWindow;
      for (const v of s.log.values()) out.add(v + w).add(v + w + 1);
      for (const d of s.inflight.values())
        out
          .add(d - 1)
          .add(d)
          .add(d + w)
          .add(d + w + 1);
    }
    const spec = burstInForce(o, fb);
    const l = configuredLimits(o, fb.token, fb.org);
    for (const [field, tat] of o.pace) {
      const limit = field === 'org' ? orgLimit(o, l, now) : tokenLimit(o, l, field.slice(4), now);
      const p = paceParams(spec, limit.max, limit.windowMs);
      if (!p) continue;
      const from = allowedFrom(tat, limit.max, limit.windowMs, p.burst);
      out
        .add(from - 1)
        .add(from)
        .add(Math.ceil(tat));
    }
    const { horizon, intervals } = parseOpen(o.policy.get('open') ?? '');
    for (const [s, e] of intervals)
      out
        .add(s - 1)
        .add(s)
        .add(e - 1)
        .add(e);
    if (horizon !== null) out.add(horizon - 1).add(horizon);
  }
  return [...out].filter((t) => t > now).sort((a, b) => a - b);
}
