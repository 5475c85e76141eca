// What a notification says (docs/notifications.md): one JSON body for every receiver, never a token.
import { checkAdvice } from '../../limiter/breaker.ts';
import { progressOf, type RunProgress } from '../../outcomes/run-progress.ts';
import type { RunCounts } from '../../outcomes/store.ts';

export const NOTIFY_EVENTS = [
  'run.finished',
  'run.failures',
  'token.refused',
  'org.paused',
  'org.halted',
  'org.blocked',
  'org.stalled',
] as const;
export type NotifyEventKind = (typeof NOTIFY_EVENTS)[number];

/** The POSTed body. */
export interface NotifyBody {
  /** One plain sentence or two: what happened and what to do. */
  text: string;
  event: NotifyEventKind;
  org: string | null;
  run: string | null;
  /** The run's (or the organization's) learners: total, done, failed, waiting, and the final buckets. */
  counts: (RunProgress & { buckets: RunCounts }) | null;
  /** When this process saw it (ISO). */
  at: string;
  tokenId?: string;
  /** A reconcile's drift report, the only report a run writes by itself. */
  report?: string | null;
  /** Since when the organization is paused, blocked or without progress (ISO). */
  since?: string;
  /** org.halted: the error budget's reason in words, with the sample's counts. */
  reason?: string;
  /** run.failures: the share that failed, and the share set (NOTIFY_FAILURE_SHARE). */
  share?: number;
  threshold?: number;
}

/** An event to send: its body and the id that makes it once for the fleet (keys.notified). */
export interface NotifyEvent {
  id: string;
  body: NotifyBody;
  /** How long the claim of this id is kept (a repeat within it is not sent). */
  ttlMs: number;
}

const DAY_MS = 86_400_000;
/** Events of one episode (a run, a pause since a time): kept long past any repeat. */
const EPISODE_TTL_MS = 30 * DAY_MS;
/** A refused token: a token refused again an hour after it was unpaused is said again. */
const TOKEN_TTL_MS = 3_600_000;

export function countsOf(buckets: RunCounts): NotifyBody['counts'] {
  const finals: RunCounts = {};
  for (const [k, v] of Object.entries(buckets)) {
    if (k !== 'total' && k !== 'queued' && k !== 'retrying' && v) finals[k as keyof RunCounts] = v;
  }
  return { ...progressOf(buckets), buckets: finals };
}

function pct(ratio: number): string {
  return `${Math.round(ratio * 1000) / 10}%`;
}

export function runFinished(
  runId: string,
  orgs: readonly string[],
  total: RunCounts,
  report: string | undefined,
  at: Date,
): NotifyEvent {
  const counts = countsOf(total);
  const p = counts as RunProgress;
  const org = orgs.length === 1 ? (orgs[0] as string) : null;
  const where = org ? `for ${org}` : `for ${orgs.length} organizations`;
  const text =
    `Run ${runId} ${where} finished: ${p.done} of ${p.total} learners transferred, ${p.failed} failed. ` +
    (p.failed > 0
      ? `See them with 'learner-transfer report --run ${runId}'; retry with 'learner-transfer retry --run ${runId}'.`
      : `Nothing to do.`) +
    (report ? ` Drift report: ${report}.` : '');
  return {
    // The total is in the id: a run that grows (enqueue --run) and finishes again is said again.
    id: `run.finished:${runId}:${p.total}`,
    ttlMs: EPISODE_TTL_MS,
    body: {
      text,
      event: 'run.finished',
      org,
      run: runId,
      counts,
      at: at.toISOString(),
      report: report ?? null,
    },
  };
}

export function runFailures(
  runId: string,
  orgs: readonly string[],
  total: RunCounts,
  threshold: number,
  at: Date,
): NotifyEvent {
  const counts = countsOf(total);
  const p = counts as RunProgress;
  const share = p.failed / Math.max(1, p.done + p.failed);
  const org = orgs.length === 1 ? (orgs[0] as string) : null;
  const text =
    `Run ${runId}${org ? ` for ${org}` : ''}: ${p.failed} of ${p.done + p.failed} finished learners failed ` +
    `(${pct(share)}, above NOTIFY_FAILURE_SHARE ${pct(threshold)}); ${p.waiting} still waiting. ` +
    `Look at the failures ('learner-transfer report --run ${runId}') before the rest fail the same way.`;
  return {
    id: `run.failures:${runId}`,
    ttlMs: EPISODE_TTL_MS,
    body: { text, event: 'run.failures', org, run: runId, counts, at: at.toISOString(), share, threshold },
  };
}

export function tokenRefused(org: string, tokenId: string, at: Date): NotifyEvent {
  const text =
    `Token ${tokenId} of ${org} was refused by the Learner API (401): it is paused and sends nothing more. ` +
    `Replace it in LEARNER_API_TOKENS (or its file), then run 'learner-transfer tokens unpause --org ${org}'.`;
  return {
    id: `token.refused:${org}:${tokenId}`,
    ttlMs: TOKEN_TTL_MS,
    body: { text, event: 'token.refused', org, run: null, counts: null, at: at.toISOString(), tokenId },
  };
}

/**
 * The error budget halted an organization, or paused one of its tokens (tokenId): said at once. Its pause
 * is not said again as paused too long (notify/watch.ts leaves a pause by `breaker` to this event).
 */
export function orgHalted(org: string, tokenId: string | null, reason: string, at: Date): NotifyEvent {
  const text =
    tokenId === null
      ? `${org} was halted by the error budget: ${reason}. No new transfer is sent; waiting learners keep ` +
        `their attempts. ${checkAdvice(reason)}, then 'learner-transfer resume --org ${org}'.`
      : `Token ${tokenId} of ${org} was paused by the error budget: ${reason}. The other tokens go on. ` +
        `Check its permission, then 'learner-transfer resume --org ${org} --token ${tokenId}'.`;
  return {
    // The halt's time names the episode: a halt after a resume is said again.
    id: `org.halted:${org}:${tokenId ?? ''}:${at.getTime()}`,
    ttlMs: EPISODE_TTL_MS,
    body: {
      text,
      event: 'org.halted',
      org,
      run: null,
      counts: null,
      at: at.toISOString(),
      reason,
      ...(tokenId !== null ? { tokenId } : {}),
    },
  };
}

function minutes(ms: number): string {
  const m = Math.round(ms / 60_000);
  return m >= 1 ? `${m} min` : `${Math.round(ms / 1000)} s`;
}

export function orgPaused(
  org: string,
  paused: { who: string; at: string },
  learners: RunCounts,
  nowMs: number,
): NotifyEvent {
  const since = Date.parse(paused.at);
  const text =
    `${org} has been paused by ${paused.who} for ${minutes(nowMs - since)} (since ${paused.at}) with ` +
    `${progressOf(learners).waiting} learners waiting. Resume it when ready: 'learner-transfer resume --org ${org}' or the Controls page.`;
  return {
    id: `org.paused:${org}:${since}`,
    ttlMs: EPISODE_TTL_MS,
    body: {
      text,
      event: 'org.paused',
      org,
      run: null,
      counts: countsOf(learners),
      at: new Date(nowMs).toISOString(),
      since: paused.at,
    },
  };
}

export function orgBlocked(
  org: string,
  why: string,
  sinceMs: number,
  learners: RunCounts,
  nowMs: number,
): NotifyEvent {
  const since = new Date(sinceMs).toISOString();
  const text =
    `${org} has been blocked for ${minutes(nowMs - sinceMs)} (${why}) with ${progressOf(learners).waiting} ` +
    `learners waiting: no transfer is sent. See 'learner-transfer status --org ${org}'.`;
  return {
    id: `org.blocked:${org}:${sinceMs}`,
    ttlMs: EPISODE_TTL_MS,
    body: {
      text,
      event: 'org.blocked',
      org,
      run: null,
      counts: countsOf(learners),
      at: new Date(nowMs).toISOString(),
      since,
    },
  };
}

export function orgStalled(org: string, sinceMs: number, learners: RunCounts, nowMs: number): NotifyEvent {
  const since = new Date(sinceMs).toISOString();
  const text =
    `${org}: ${progressOf(learners).waiting} learners have waited ${minutes(nowMs - sinceMs)} for a worker ` +
    `although the budget allows transfers: no 'learner-transfer work' process took them. Check that one ` +
    `runs for ${org} (not started with --org for others only) and see 'learner-transfer status --org ${org}'.`;
  return {
    id: `org.stalled:${org}:${sinceMs}`,
    ttlMs: EPISODE_TTL_MS,
    body: {
      text,
      event: 'org.stalled',
      org,
      run: null,
      counts: countsOf(learners),
      at: new Date(nowMs).toISOString(),
      since,
    },
  };
}
