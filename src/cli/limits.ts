// `limits show|set|reset` and `changes`: the fleet's limits in Redis (decision 10), changed live,
// each change logged with who made it.
import { requireOrg } from '../app/read-context.ts';
import { tokensOf, type Config } from '../core/config.ts';
import { cliActor, readChanges, type ChangeEntry } from '../limiter/control-log.ts';
import { formatRate, humanizeMs } from '../core/duration.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { POLICY_RECHECK_MS, seedPolicy, type LimitPolicy } from '../limiter/policy.ts';
import {
  checkLimitChange,
  describeLimits,
  resetLimits,
  resetRunWindow,
  setLimits,
} from '../limiter/policy-control.ts';
import type { PauseInfo } from '../limiter/types.ts';
import { forTerminal, jsonForTerminal } from '../core/terminal-safe.ts';
import {
  collectLimits,
  describeChange,
  limitsOrigin,
  type LearnedDetail,
  type OrgLimits,
} from '../ops/views/limits.ts';
import { summarizeChange } from '../ops/views/controls.ts';
import type { Cli } from './io.ts';
import { changeOfFlags, kindWords } from '../limiter/kinds.ts';
import { scheduleOf } from '../limiter/run-window-open.ts';
import { describeRunWindow } from '../limiter/run-window.ts';
import { when } from './status.ts';

/** The org must be one of this environment's; a token given must be one of that org's. */
export function checkOrgAndToken(config: Readonly<Config>, org: string, tokenId?: string): void {
  requireOrg(config, org);
  if (tokenId === undefined) return;
  const ids = tokensOf(config as Config, org).map((t) => t.id);
  if (!ids.includes(tokenId)) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `--token ${tokenId} is not a token of '${org}' in LEARNER_API_TOKENS (its tokens: ${ids.join(', ')})`,
    );
  }
}

const pausedText = (p: PauseInfo | null) =>
  p ? `PAUSED by ${p.who} since ${when(p.at)}${p.reason ? `: ${p.reason}` : ''}` : 'no';

export function formatLimits(l: OrgLimits): string {
  // Each kind's line (limiter/kinds.ts); learned limits before the guard rails.
  const kind = (guardRails: boolean) =>
    kindWords(guardRails).map((w) => `  ${w.label.padEnd(14)} ${w.show(l, l.environmentSet)}`);
  const lines = [
    `${l.org}: ${limitsOrigin(l)}`,
    ...kind(false),
    ...(l.learned && l.learnedDetail
      ? [
          `  learned        organization ${l.learned} from the service's 429s (${describeLearned(l.learnedDetail)})`,
        ]
      : []),
    ...kind(true),
    `  paused         ${pausedText(l.paused)}`,
    `  ${'token'.padEnd(14)} ${'limit'.padEnd(14)} ${'learned'.padEnd(9)} ${'429s'.padEnd(5)} ${'paused'.padEnd(6)} pacing`,
  ];
  for (const t of l.tokens) {
    lines.push(
      `  ${t.tokenId.padEnd(14)} ${`${t.limit}${t.override ? ' own' : ''}`.padEnd(14)} ${(t.learned ?? '-').padEnd(9)} ${String(t.rateLimited ?? '-').padEnd(5)} ${pausedText(t.paused).padEnd(6)} ${t.pacing ?? 'not paced'}`,
    );
  }
  let anyLearned = l.learned !== null;
  for (const t of l.tokens) {
    if (!t.learnedDetail) continue;
    anyLearned = true;
    lines.push(`  note: token ${t.tokenId} ${t.learned} (${describeLearned(t.learnedDetail)})`);
  }
  if (anyLearned) {
    lines.push(
      `  note: a learned limit climbs back toward the configured one by itself; 'limits reset --org ${l.org}' forgets it`,
    );
  }
  for (const d of l.differsFromEnvironment) {
    lines.push(
      `  note: ${d.variable}=${d.env} in this environment differs from Redis (${d.stored}): every worker follows Redis ('limits reset --org ${l.org}' applies LIMIT_*)`,
    );
  }
  return lines.join('\n');
}

function describeLearned(d: LearnedDetail): string {
  return `learned ${d.max} at ${d.at}, next probe step in ${humanizeMs(d.nextProbeInMs)}`;
}

export function formatChange(e: ChangeEntry): string {
  return [
    e.at,
    e.who,
    e.action,
    e.org ?? '-',
    e.tokenId ? `token ${e.tokenId}` : '',
    // Limits and pauses as before -> after; other changes by their fields.
    summarizeChange(e),
  ]
    .filter(Boolean)
    .join('  ');
}

function summary(org: string, before: LimitPolicy, after: LimitPolicy): string {
  const text = describeChange({ before: describeLimits(before), after: describeLimits(after) });
  return `${org}: ${text === 'no change' ? 'limits unchanged' : text}`;
}

/** The flags of `limits set`: the organization, a token, and limiter/kinds.ts's flags. */
type SetFlags = { org: string; token?: string } & Record<string, unknown>;

export async function showLimits(cli: Cli, opts: { org?: string; json?: boolean }): Promise<void> {
  const config = await cli.config({ requireTokens: true });
  const orgs = opts.org ? [requireOrg(config, opts.org)] : [...config.orgs];
  const ctx = await cli.readContext(config);
  try {
    const out: OrgLimits[] = [];
    for (const org of orgs) out.push(await collectLimits(ctx, org));
    cli.print(
      opts.json
        ? jsonForTerminal(JSON.stringify({ orgs: out }, null, 2))
        : forTerminal(out.map(formatLimits).join('\n\n')),
    );
  } finally {
    await ctx.close();
  }
}

export async function setCommand(cli: Cli, opts: SetFlags): Promise<void> {
  const config = await cli.config({ requireTokens: true });
  checkOrgAndToken(config, opts.org, opts.token);
  const change = changeOfFlags(opts);
  checkLimitChange(opts.org, change);
  const ctx = await cli.readContext(config);
  try {
    // What is not changed stays; an organization never stored is seeded from LIMIT_* first.
    await seedPolicy(ctx.redis, ctx.keys, opts.org, config);
    const r = await setLimits(ctx.redis, ctx.keys, opts.org, change, config, cliActor());
    cli.print(forTerminal(summary(opts.org, r.before, r.after)));
    const perOrg = r.after.perOrg ?? config.limitPerOrg;
    if (r.after.reserve >= perOrg.max) {
      cli.print(
        `warning: the reserve (${r.after.reserve}) leaves nothing of ${formatRate(perOrg)} to this tool: no transfer of '${opts.org}' will be sent`,
      );
    }
    const window = r.after.runWindow ? scheduleOf(r.after.runWindow) : null;
    if (change.runWindow && window)
      cli.print(forTerminal(`run window: ${describeRunWindow(window, Date.now())}`));
    cli.print(`every worker applies it within ${POLICY_RECHECK_MS / 1000} s`);
  } finally {
    await ctx.close();
  }
}

export async function resetCommand(cli: Cli, opts: { org: string; runWindow?: boolean }): Promise<void> {
  const config = await cli.config({ requireTokens: true });
  requireOrg(config, opts.org);
  const ctx = await cli.readContext(config);
  try {
    const r = opts.runWindow
      ? await resetRunWindow(ctx.redis, ctx.keys, opts.org, cliActor())
      : await resetLimits(ctx.redis, ctx.keys, opts.org, config, cliActor());
    cli.print(forTerminal(summary(opts.org, r.before, r.after)));
    cli.print(`every worker applies it within ${POLICY_RECHECK_MS / 1000} s`);
  } finally {
    await ctx.close();
  }
}

export async function changesCommand(
  cli: Cli,
  opts: { org?: string; limit?: number; json?: boolean },
): Promise<void> {
  const config = await cli.config();
  const ctx = await cli.readContext(config);
  try {
    const entries = await readChanges(ctx.redis, ctx.keys, {
      count: opts.limit ?? 50,
      ...(opts.org ? { org: opts.org } : {}),
    });
    if (opts.json) cli.print(jsonForTerminal(JSON.stringify({ changes: entries }, null, 2)));
    else if (entries.length === 0) cli.print('no change recorded');
    else cli.print(forTerminal(entries.map(formatChange).join('\n')));
  } finally {
    await ctx.close();
  }
}
