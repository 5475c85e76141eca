// Each organization's one state, the most urgent that applies (`alert`, `working`, `failures`, `idle`),
// so `status` and the overview list a fleet by urgency and sum up the idle ones.
import { progressOf } from '../../outcomes/run-progress.ts';
import { alertsOf, type Alert } from './alerts.ts';
import type { OrgStatus } from './status.ts';

export const ORG_STATES = ['alert', 'working', 'failures', 'idle'] as const;
export type OrgState = (typeof ORG_STATES)[number];

/** The state filters of the overview: `attention` (the default) is every state but idle. */
export const STATE_FILTERS = ['attention', 'all', ...ORG_STATES] as const;
export type StateFilter = (typeof STATE_FILTERS)[number];

export const STATE_LABELS: Record<StateFilter, string> = {
  attention: 'with work or problems',
  all: 'all',
  alert: 'with alerts',
  working: 'working',
  failures: 'with failures',
  idle: 'idle',
};

/** A fleet this small fits on a screen: every organization is listed, idle or not. */
export const SMALL_FLEET = 10;

export interface Classified {
  state: OrgState;
  alerts: Alert[];
  /** Idle with learners, all of them done or failed: "all done"; idle with none yet: "empty". */
  idle: 'done' | 'empty' | null;
  /** Sort key: state first, an error before a warning among alerts. */
  rank: number;
}

export function classify(o: OrgStatus): Classified {
  const alerts = alertsOf([o]);
  const j = o.jobs;
  const progress = progressOf(o.learners);
  let state: OrgState = 'idle';
  if (alerts.length > 0) state = 'alert';
  else if (o.remaining > 0 || j.waiting + j.active + j.delayed + j.prioritized > 0) state = 'working';
  else if (progress.failed > 0) state = 'failures';
  const rank =
    ORG_STATES.indexOf(state) * 2 + (state === 'alert' && !alerts.some((a) => a.level === 'error') ? 1 : 0);
  return {
    state,
    alerts,
    idle: state !== 'idle' ? null : progress.total > 0 ? 'done' : 'empty',
    rank,
  };
}

export interface FleetSummary {
  total: number;
  byState: Record<OrgState, number>;
  /** Idle organizations whose learners are all done, and those with no learner yet. */
  idleDone: number;
  idleEmpty: number;
}

export function summarize(entries: Iterable<Classified>): FleetSummary {
  const s: FleetSummary = {
    total: 0,
    byState: { alert: 0, working: 0, failures: 0, idle: 0 },
    idleDone: 0,
    idleEmpty: 0,
  };
  for (const e of entries) {
    s.total += 1;
    s.byState[e.state] += 1;
    if (e.idle === 'done') s.idleDone += 1;
    if (e.idle === 'empty') s.idleEmpty += 1;
  }
  return s;
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** "945 organizations idle, all done" or "945 organizations idle (940 all done, 5 with no learners yet)". */
export function idleText(s: FleetSummary): string {
  const n = s.byState.idle;
  const head = `${plural(n, 'organization')} idle`;
  if (n === 0) return `no organization idle`;
  if (s.idleEmpty === 0) return `${head}, all done`;
  if (s.idleDone === 0) return `${head}, no learners yet`;
  return `${head} (${s.idleDone} all done, ${s.idleEmpty} with no learners yet)`;
}

/** "1000 organizations: 5 with alerts, 40 working, 10 with failures, 945 idle, all done". */
export function summaryText(s: FleetSummary): string {
  const parts: string[] = [];
  if (s.byState.alert) parts.push(`${s.byState.alert} with alerts`);
  if (s.byState.working) parts.push(`${s.byState.working} working`);
  if (s.byState.failures) parts.push(`${s.byState.failures} with failures`);
  if (s.byState.idle) parts.push(idleText(s).replace(/ organizations? idle/, ' idle'));
  return `${plural(s.total, 'organization')}${parts.length ? `: ${parts.join(', ')}` : ''}`;
}

/** Whether a filter lets an organization through (`attention` lets idle ones through in a small fleet). */
export function matchesState(filter: StateFilter, state: OrgState, fleetSize: number): boolean {
  if (filter === 'all') return true;
  if (filter === 'attention') return state !== 'idle' || fleetSize <= SMALL_FLEET;
  return filter === state;
}

/** Ranked: by state (alerts with an error first), then in the order given (LEARNER_API_TOKENS's). */
export function ranked<T extends { org: string; c: Classified }>(items: readonly T[]): T[] {
  return items
    .map((item, i) => ({ item, i }))
    .sort((a, b) => a.item.c.rank - b.item.c.rank || a.i - b.i)
    .map((x) => x.item);
}
