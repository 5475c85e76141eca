import { collectStatus, type OrgStatus, type Status } from '../ops/views/status.ts';
import { classify, idleText, ranked, SMALL_FLEET, summarize, summaryText } from '../ops/views/org-states.ts';
import { requireOrg } from '../app/read-context.ts';
import { formatRate, humanizeMs } from '../core/duration.ts';
import type { LearnedView, ScopeView } from '../limiter/types.ts';
import { kindWords } from '../limiter/kinds.ts';
import { forTerminal, jsonForTerminal } from '../core/terminal-safe.ts';
import type { Cli } from './io.ts';
import { formatUtc } from '../ops/eta/eta.ts';
import type { Config } from '../core/config.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { TOKENS_FILE_VAR } from '../core/token-file.ts';
import { describeRedis, redisVariable } from '../core/redis-target.ts';

/**
 * Without a token there is no organization to show: says which variables to set (exit 3), naming
 * the Redis and prefix it would have read.
 */
export function noOrganizations(config: Readonly<Config>): LearnerTransferError {
  return new LearnerTransferError(
    'LT_CONFIG_INVALID',
    'status: no organization is configured, so there is nothing to show. Set LEARNER_API_TOKENS ' +
      `(ORG:TOKEN pairs, like acme:TOKEN1,beta:TOKEN2) or ${TOKENS_FILE_VAR} (a file of ORG:TOKEN lines) ` +
      `to the tokens of the workers, and ${redisVariable(config.redis)} and QUEUE_PREFIX to theirs ` +
      `(now ${describeRedis(config.redis)} and ${config.queuePrefix})`,
  );
}

/** An ISO time as people read it: "2026-12-14 09:00:05 UTC" (unchanged if unparsable). */
export function when(iso: string): string {
  const ms = Date.parse(iso);
  return Number.isFinite(ms) ? formatUtc(ms, true) : iso;
}

/** " (learned 10/2s from 429s, configured 25/2s; next probe step in 6 s)", or ''. */
function learnedText(v: { limit: number; windowMs: number; learned?: LearnedView }): string {
  if (!v.learned) return '';
  const rate = (max: number) => formatRate({ max, windowMs: v.windowMs });
  return ` (learned ${rate(v.limit)} from 429s, configured ${rate(v.learned.configured)}; next probe step in ${humanizeMs(v.learned.nextProbeInMs)})`;
}

/** " bucket 3 of 10 (next in 12 s)" for a paced scope, '' otherwise. */
function bucketText(s: ScopeView): string {
  if (!s.pace) return '';
  return `, bucket ${s.pace.available} of ${s.pace.burst}${s.pace.available === 0 ? ` (next in ${humanizeMs(s.pace.nextInMs)})` : ''}`;
}

/** One organization's block: learners, jobs, limits, pauses, budget, ETA. */
function orgLines(o: OrgStatus): string[] {
  const lines: string[] = [];
  const learners = Object.entries(o.learners)
    .map(([b, n]) => `${b} ${n}`)
    .join(', ');
  lines.push(`\n${o.org}`);
  lines.push(`  learners: ${learners || 'none yet'}`);
  lines.push(
    `  jobs: ${o.jobs.waiting} waiting, ${o.jobs.delayed} delayed, ${o.jobs.active} active, ${o.jobs.failed} failed (kept)`,
  );
  // Each kind's line (limiter/kinds.ts): the limits, the pacing, the run window.
  for (const w of kindWords()) {
    const line = w.status?.(o.budget);
    if (line) lines.push(`  ${line}`);
  }
  const b = o.budget.org;
  if (b.paused) {
    lines.push(
      `  PAUSED by ${b.paused.who} since ${when(b.paused.at)}${b.paused.reason ? `: ${b.paused.reason}` : ''} (resume --org ${o.org})`,
    );
  }
  lines.push(
    `  organization budget: ${b.used} used, ${b.inflight} in flight, ${b.remaining} of ${b.limit} left` +
      (b.remaining === 0 ? `, next in ${humanizeMs(b.nextFreeInMs ?? 0)}` : '') +
      bucketText(b) +
      learnedText(b) +
      (b.blocked ? ` [BLOCKED: ${b.blocked.reason}]` : ''),
  );
  for (const t of o.budget.tokens) {
    lines.push(
      `  token ${t.tokenId}: ${t.used} used, ${t.inflight} in flight, ${t.remaining} of ${t.limit} left` +
        bucketText(t) +
        learnedText(t) +
        (t.rateLimited ? `, ${t.rateLimited} answered 429` : '') +
        (t.blocked
          ? ` [${t.blocked.reason === '401' ? 'PAUSED: refused with 401' : `blocked: ${t.blocked.reason}`}]`
          : '') +
        (t.paused
          ? ` [PAUSED by ${t.paused.who} since ${when(t.paused.at)}${t.paused.reason ? `: ${t.paused.reason}` : ''}]`
          : ''),
    );
  }
  lines.push(`  remaining ${o.remaining}: ${o.eta.text}`);
  for (const w of o.approval ?? []) {
    lines.push(
      `  canary: run ${w.runId} ${w.verdict.text}; ${w.awaiting} await approval ('learner-transfer approve --run ${w.runId}')`,
    );
  }
  return lines;
}

/** Names shown after the idle summary line, before "and N more". */
const IDLE_NAMES_SHOWN = 5;

export interface FormatOptions {
  /** Every organization in full, idle or not (`--all`, or organizations named with `--org`). */
  all?: boolean;
}

/** This process's own limits, "LIMIT_PER_TOKEN=100/1h" or "... built-in default 1000/1d". */
export function environmentLimits(l: Status['limits']): string {
  const said = (v: 'LIMIT_PER_TOKEN' | 'LIMIT_PER_ORG', value: string) =>
    l.set.includes(v) ? `${v}=${value}` : `${v}'s built-in default ${value}`;
  return `this process: ${said('LIMIT_PER_TOKEN', l.perToken)}, ${said('LIMIT_PER_ORG', l.perOrg)}`;
}

/**
 * Organizations needing a person or working first (org-states.ts), each in full; a fleet's idle
 * ones past SMALL_FLEET in one line, so a thousand idle schools are not 20,000 lines.
 */
export function formatStatus(s: Status, options: FormatOptions = {}): string {
  const lines: string[] = [
    `status at ${when(s.at)} (${environmentLimits(s.limits)}; workers follow the limits in Redis below)`,
  ];
  // Only when it needs a person: a Redis that takes writes and has room is not news.
  if (s.redis && !s.redis.writable) lines.push(`REDIS: ${s.redis.message}`);
  const orgs = ranked(s.orgs.map((o) => ({ org: o.org, o, c: classify(o) })));
  const summary = summarize(orgs.map((x) => x.c));
  if (orgs.length > 1) lines.push(summaryText(summary));
  const whole = options.all === true || orgs.length <= SMALL_FLEET;
  for (const { o, c } of orgs) if (whole || c.state !== 'idle') lines.push(...orgLines(o));
  if (!whole && summary.byState.idle > 0) {
    const idle = orgs.filter((x) => x.c.state === 'idle').map((x) => x.org);
    const names = idle.slice(0, IDLE_NAMES_SHOWN).join(', ');
    const more = idle.length > IDLE_NAMES_SHOWN ? `, and ${idle.length - IDLE_NAMES_SHOWN} more` : '';
    lines.push(`\n${idleText(summary)}: ${names}${more} (--all shows them, --org KEY one of them)`);
  }
  return lines.join('\n');
}

/** The JSON of `status --json`: every organization asked for, in order, with its state. */
function withStates(s: Status) {
  const classified = s.orgs.map((o) => ({ o, c: classify(o) }));
  const orgs = classified.map(({ o, c }) => ({ ...o, state: c.state }));
  const summary = summarize(classified.map(({ c }) => c));
  return { ...s, summary: { ...summary, text: summaryText(summary) }, orgs };
}

export async function statusCommand(
  cli: Cli,
  opts: { json?: boolean; all?: boolean; org?: string[] },
): Promise<void> {
  const config = await cli.config();
  if (config.orgs.length === 0) throw noOrganizations(config);
  const orgs = opts.org ? [...new Set(opts.org.map((o) => requireOrg(config, o)))] : undefined;
  const ctx = await cli.readContext(config);
  try {
    // collectStatus computed each ETA at the limits in Redis.
    const status = await collectStatus(ctx, orgs);
    // Redis's and the service's words are in it: nothing a terminal would run.
    const text = opts.json
      ? jsonForTerminal(JSON.stringify(withStates(status), null, 2))
      : forTerminal(formatStatus(status, { all: opts.all === true || orgs !== undefined }));
    cli.print(text);
  } finally {
    await ctx.close();
  }
}
