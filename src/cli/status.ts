import { Command } from 'commander';

import { collectStatus, type Status } from '../ops/status.ts';
import { formatRate, humanizeMs } from '../core/duration.ts';
import { estimate } from '../ops/eta.ts';
import { paceOf } from '../limiter/policy.ts';
import type { LearnedView } from '../limiter/types.ts';
import { forTerminal, jsonForTerminal } from '../core/terminal-safe.ts';
import type { Cli } from './io.ts';

/** " (learned 10/2s from 429s, configured 25/2s; next probe step in 6 s)", or '' when nothing is learned. */
function learnedText(v: { limit: number; windowMs: number; learned?: LearnedView }): string {
  if (!v.learned) return '';
  const rate = (max: number) => formatRate({ max, windowMs: v.windowMs });
  return ` (learned ${rate(v.limit)} from 429s, configured ${rate(v.learned.configured)}; next probe step in ${humanizeMs(v.learned.nextProbeInMs)})`;
}

export function formatStatus(s: Status): string {
  const lines: string[] = [
    `status at ${s.at} (LIMIT_* of this environment: ${s.limits.perToken} per token, ${s.limits.perOrg} per organization; workers follow the limits in Redis below)`,
  ];
  // Only when it needs a person: a Redis that takes writes and has room is not news.
  if (s.redis && !s.redis.writable) lines.push(`REDIS: ${s.redis.message}`);
  for (const o of s.orgs) {
    const learners = Object.entries(o.learners)
      .map(([b, n]) => `${b} ${n}`)
      .join(', ');
    lines.push(`\n${o.org}`);
    lines.push(`  learners: ${learners || 'none yet'}`);
    lines.push(
      `  jobs: ${o.jobs.waiting} waiting, ${o.jobs.delayed} delayed, ${o.jobs.active} active, ${o.jobs.failed} failed (kept)`,
    );
    const b = o.budget.org;
    // The configured limits (a learned one is shown with the budget it holds, below).
    const rate = (x: { limit: number; windowMs: number; learned?: LearnedView }) =>
      formatRate({ max: x.learned?.configured ?? x.limit, windowMs: x.windowMs });
    const tokenRates = [...new Set(o.budget.tokens.map(rate))];
    lines.push(
      `  limits${o.budget.policyStored ? ' (Redis)' : ' (LIMIT_*: none stored yet)'}: ` +
        `${formatRate({ max: (b.learned?.configured ?? b.limit) + o.budget.reserve, windowMs: b.windowMs })} per organization` +
        (o.budget.reserve > 0 ? ` less a reserve of ${o.budget.reserve} (${rate(b)} for this tool)` : '') +
        `, ${tokenRates.join(' / ') || '-'} per token`,
    );
    if (b.paused) lines.push(`  PAUSED by ${b.paused.who} since ${b.paused.at} (resume --org ${o.org})`);
    lines.push(
      `  organization budget: ${b.used} used, ${b.inflight} in flight, ${b.remaining} of ${b.limit} left` +
        (b.remaining === 0 ? `, next in ${humanizeMs(b.nextFreeInMs ?? 0)}` : '') +
        learnedText(b) +
        (b.blocked ? ` [BLOCKED: ${b.blocked.reason}]` : ''),
    );
    for (const t of o.budget.tokens) {
      lines.push(
        `  token ${t.tokenId}: ${t.used} used, ${t.inflight} in flight, ${t.remaining} of ${t.limit} left` +
          learnedText(t) +
          (t.rateLimited ? `, ${t.rateLimited} answered 429` : '') +
          (t.blocked
            ? ` [${t.blocked.reason === '401' ? 'PAUSED: refused with 401' : `blocked: ${t.blocked.reason}`}]`
            : '') +
          (t.paused ? ` [PAUSED by ${t.paused.who} since ${t.paused.at}]` : ''),
      );
    }
    lines.push(
      `  remaining ${o.remaining}: ${b.paused && o.remaining > 0 ? 'paused; at the current limits, ' : ''}done in ${o.eta.text}`,
    );
  }
  return lines.join('\n');
}

export function register(program: Command, cli: Cli): void {
  program
    .command('status')
    .description(
      'Learners by state and outcome, budgets per token and organization, and the ETA of the remaining work',
    )
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const config = cli.config();
      const ctx = await cli.context(config);
      try {
        const status = await collectStatus(ctx);
        // The ETA at the limits every worker applies (the policy in Redis), not this environment's LIMIT_*.
        for (const o of status.orgs) {
          const pace = paceOf(o.budget);
          if (pace.perOrg.max <= 0 && o.remaining > 0) {
            o.eta = {
              ms: Infinity,
              boundBy: 'org',
              availableNow: 0,
              text: `never at these limits: the reserve leaves this tool nothing (limits set --org ${o.org} --reserve)`,
            };
            continue;
          }
          o.eta = estimate({
            remaining: o.remaining,
            tokens: pace.tokens,
            perToken: pace.perToken,
            perOrg: pace.perOrg,
            availableNow: pace.availableNow,
          });
        }
        // Redis's and the service's words are in it: nothing a terminal would run.
        cli.print(
          opts.json ? jsonForTerminal(JSON.stringify(status, null, 2)) : forTerminal(formatStatus(status)),
        );
      } finally {
        await ctx.close();
      }
    });
}
