// Learners left over time, per organization and per run, for the overview's burn-down, read backwards
// from the learners left now and the hourly final counts (docs/dashboard.md, "The burn-down").
import { HOUR_MS, hourIndex, type HourBucket } from '../../outcomes/hourly.ts';
import type { Eta } from './eta.ts';

export interface BurnDown {
  /** [ms since the epoch, learners left], oldest first; the last is `now`. */
  points: [number, number][];
  now: number;
  left: number;
  /** The projected finish (ms); null when there is none to draw (nothing left, fits now, no finish). */
  finishAt: number | null;
  /** "finishes Mon 14 Dec 2026 09:00 UTC, in 3 d 4 h", "nothing left", "no finish: paused ...". */
  finishText: string;
  /** Some hour in the span was recorded without final counts: the line before it is a floor. */
  partial: boolean;
}

/** A run as the burn-down needs it: its creation and its learners left now (in one organization or all). */
export interface RunLeft {
  id: string;
  createdAt: number;
  left: number;
}

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** "Mon 14 Dec 2026 09:00 UTC" (to the minute). */
export function formatDate(ms: number): string {
  const d = new Date(Math.round(ms / 60_000) * 60_000);
  const hh = String(d.getUTCHours()).padStart(2, '0');
  const mm = String(d.getUTCMinutes()).padStart(2, '0');
  return `${WEEKDAYS[d.getUTCDay()]} ${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()} ${hh}:${mm} UTC`;
}

/** "3 d 4 h", "2 h 5 min", "12 min", "40 s": the two largest units. */
export function formatSpan(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return 'now';
  const s = Math.ceil(ms / 1000);
  const units: [string, number][] = [
    ['d', Math.floor(s / 86_400)],
    ['h', Math.floor((s % 86_400) / 3600)],
    ['min', Math.floor((s % 3600) / 60)],
    ['s', s % 60],
  ];
  const first = units.findIndex(([, n]) => n > 0);
  return units
    .slice(first, first + 2)
    .filter(([, n]) => n > 0)
    .map(([u, n]) => `${n} ${u}`)
    .join(' ');
}

/** The finish of an organization's work as a person reads it, from its ETA. */
export function finishOf(eta: Eta, left: number): { at: number | null; text: string } {
  if (left <= 0) return { at: null, text: 'nothing left' };
  if (eta.paused || !Number.isFinite(eta.ms)) return { at: null, text: `no finish: ${eta.text}` };
  if (eta.finishAt === null) return { at: null, text: 'finishes now: it fits the budget left' };
  return { at: eta.finishAt, text: `finishes ${formatDate(eta.finishAt)}, in ${formatSpan(eta.ms)}` };
}

/**
 * The finish of a run from its organizations' finishes: the latest of those with learners of the run
 * left. An organization's finish counts all its work, so the run's is at the latest that.
 */
export function runFinishOf(
  parts: readonly { left: number; eta: Eta }[],
  now: number,
): { at: number | null; text: string } {
  const open = parts.filter((p) => p.left > 0);
  if (open.length === 0) return { at: null, text: 'nothing left' };
  const stuck = open.find((p) => p.eta.paused || !Number.isFinite(p.eta.ms));
  if (stuck) return { at: null, text: `no finish: ${stuck.eta.text}` };
  const at = Math.max(...open.map((p) => p.eta.finishAt ?? 0));
  if (at <= now) return { at: null, text: 'finishes now: it fits the budget left' };
  return { at, text: `finishes ${formatDate(at)} at the latest, in ${formatSpan(at - now)}` };
}

/** Finished per hour index, and whether some hour of the records had no final counts. */
function finishedByHour(
  hours: readonly HourBucket[],
  runId?: string,
): { byHour: Map<number, number>; partial: Set<number> } {
  const byHour = new Map<number, number>();
  const partial = new Set<number>();
  for (const h of hours) {
    const i = hourIndex(Date.parse(h.hour));
    if (h.finished === undefined) partial.add(i);
    const n = runId === undefined ? (h.finished ?? 0) : (h.finishedByRun?.[runId] ?? 0);
    if (n > 0) byHour.set(i, (byHour.get(i) ?? 0) + n);
  }
  return { byHour, partial };
}

interface Series {
  left: number;
  now: number;
  /** Per-hour final counts (summed over organizations for a run). */
  hours: readonly HourBucket[];
  runId?: string;
  /** No point before this (a run's creation). */
  since?: number;
  /** Runs whose learners arrived after the span began: subtracted before their creation. */
  runs?: readonly RunLeft[];
  finish: { at: number | null; text: string };
}

function seriesOf(s: Series): BurnDown {
  const { byHour, partial } = finishedByHour(s.hours, s.runId);
  const nowHour = hourIndex(s.now);
  const sinceHour = s.since === undefined ? -Infinity : hourIndex(s.since);
  // A run's initial left: its left now plus all it finished since its creation (the hours kept).
  const initial = (r: RunLeft) => {
    let n = r.left;
    for (const [i, k] of finishedByHour(s.hours, r.id).byHour) if (i >= hourIndex(r.createdAt)) n += k;
    return n;
  };
  const runs = (s.runs ?? []).map((r) => ({ at: r.createdAt, initial: initial(r) }));
  const recorded = s.hours.map((h) => hourIndex(Date.parse(h.hour)));
  const firstHours = [...recorded, ...runs.map((r) => hourIndex(r.at))].filter((i) => i >= sinceHour);
  const start = Math.max(sinceHour, Math.min(nowHour, ...firstHours));
  // Left at t: an hour's finishes count as after t unless the hour ended by t (the records' resolution);
  // a run created after t was not there yet. A run's creation is a step: the value just before, then at.
  const leftAt = (t: number, createdBy: (at: number) => boolean) => {
    let left = s.left;
    for (const [h, n] of byHour) if (h >= hourIndex(t)) left += n;
    for (const r of runs) if (!createdBy(r.at)) left -= r.initial;
    return Math.max(0, left);
  };
  const from = Math.max(start * HOUR_MS, s.since ?? -Infinity);
  const instants = new Set<number>([from]);
  for (let i = start + 1; i <= nowHour; i++) if (i * HOUR_MS > from) instants.add(i * HOUR_MS);
  for (const r of runs) if (r.at > from && r.at < s.now) instants.add(r.at);
  const points: [number, number][] = [];
  for (const at of [...instants].filter((t) => t < s.now).sort((a, b) => a - b)) {
    if (runs.some((r) => r.at === at)) points.push([at, leftAt(at, (c) => c < at)]);
    points.push([at, leftAt(at, (c) => c <= at)]);
  }
  points.push([s.now, s.left]);
  const span = new Set([...partial].filter((i) => i >= start && i <= nowHour));
  return {
    points,
    now: s.now,
    left: s.left,
    finishAt: s.finish.at,
    finishText: s.finish.text,
    partial: span.size > 0,
  };
}

/** An organization's burn-down: its hours, its left now, the runs of it created in the span. */
export function orgBurnDown(
  hours: readonly HourBucket[],
  left: number,
  now: number,
  eta: Eta,
  runs: readonly RunLeft[],
): BurnDown {
  return seriesOf({ hours, left, now, runs, finish: finishOf(eta, left) });
}

/** A run's burn-down: the hours of its organizations (all of them), its left now, its finish. */
export function runBurnDown(
  run: RunLeft,
  hours: readonly HourBucket[],
  now: number,
  finish: { at: number | null; text: string },
): BurnDown {
  return seriesOf({ hours, left: run.left, now, runId: run.id, since: run.createdAt, finish });
}
