import { Command } from 'commander';
import { createContext } from '../app.ts';
import { collectStatus, type Status } from '../outcomes/status.ts';
import { humanizeMs } from '../duration.ts';
import { forTerminal, jsonForTerminal } from '../terminal-safe.ts';
import { loadCliConfig } from './shared.ts';

export function formatStatus(s: Status): string {
  const lines: string[] = [
    `status at ${s.at} (limits: ${s.limits.perToken} per token, ${s.limits.perOrg} per organization)`,
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
    lines.push(
      `  organization budget: ${b.used} used, ${b.inflight} in flight, ${b.remaining} of ${b.limit} left` +
        (b.remaining === 0 ? `, next in ${humanizeMs(b.nextFreeInMs ?? 0)}` : '') +
        (b.blocked ? ` [BLOCKED: ${b.blocked.reason}]` : ''),
    );
    for (const t of o.budget.tokens) {
      lines.push(
        `  token ${t.tokenId}: ${t.used} used, ${t.inflight} in flight, ${t.remaining} of ${t.limit} left` +
          (t.blocked
            ? ` [${t.blocked.reason === '401' ? 'PAUSED: refused with 401' : `blocked: ${t.blocked.reason}`}]`
            : ''),
      );
    }
    lines.push(`  remaining ${o.remaining}: done in ${o.eta.text}`);
  }
  return lines.join('\n');
}

export function register(program: Command): void {
  program
    .command('status')
    .description(
      'Learners by state and outcome, budgets per token and organization, and the ETA of the remaining work',
    )
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const config = loadCliConfig();
      const ctx = await createContext(config);
      try {
        const status = await collectStatus(ctx);
        // Redis's and the service's words are in it: nothing a terminal would run.
        console.log(
          opts.json ? jsonForTerminal(JSON.stringify(status, null, 2)) : forTerminal(formatStatus(status)),
        );
      } finally {
        await ctx.close();
      }
    });
}
