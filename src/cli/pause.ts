// `pause` and `resume`: stop sending new transfers for an organization (or one of its tokens) on every
// worker of every host, and start again. The pause is in Redis (the organization's policy), so it
// outlives restarts, and acquire reads it in its own step: no permit is granted after it.
import { Command, Option } from 'commander';

import { cliActor } from '../limiter/control-log.ts';
import { POLICY_RECHECK_MS, seedPolicy } from '../limiter/policy.ts';
import { setPaused } from '../limiter/policy-control.ts';
import { forTerminal } from '../core/terminal-safe.ts';
import { checkOrgAndToken } from './limits.ts';
import type { Cli } from './io.ts';
import { tokenIdOption } from './parsers.ts';

function command(program: Command, cli: Cli, paused: boolean): void {
  const name = paused ? 'pause' : 'resume';
  program
    .command(name)
    .description(
      paused
        ? 'Send no new transfer for an organization (or one token of it) from any worker, until resume; calls in flight finish'
        : 'Resume the transfers of an organization (or one token of it) paused with pause',
    )
    .requiredOption('--org <key>', 'organization')
    .addOption(
      new Option('--token <id>', 'only this token (as tokens list shows it)').argParser(tokenIdOption),
    )
    .action(async (opts: { org: string; token?: string }) => {
      const config = cli.config({ requireTokens: true });
      checkOrgAndToken(config, opts.org, opts.token);
      const ctx = await cli.context(config);
      try {
        const tokenId = opts.token ?? null;
        // Never stored yet: the limits are seeded from LIMIT_* first, as a worker would.
        await seedPolicy(ctx.redis, ctx.keys, opts.org, config);
        const r = await setPaused(ctx.redis, ctx.keys, opts.org, tokenId, paused, cliActor());
        const what = tokenId === null ? `organization '${opts.org}'` : `token ${tokenId} of '${opts.org}'`;
        const before = tokenId === null ? r.before.paused : r.before.pausedTokens[tokenId];
        if (paused && before) {
          cli.print(forTerminal(`${what} was already paused by ${before.who} since ${before.at}`));
        } else if (paused) {
          cli.print(
            forTerminal(
              `paused ${what}: no worker sends a new transfer for it from now on; calls in flight finish`,
            ),
          );
        } else if (!before) {
          cli.print(forTerminal(`${what} was not paused`));
        } else {
          cli.print(
            forTerminal(
              `resumed ${what} (paused by ${before.who} since ${before.at}${before.reason ? `: ${before.reason}` : ''}): ` +
                `workers go on within ${POLICY_RECHECK_MS / 1000} s; the error budget's sample starts afresh`,
            ),
          );
        }
        if (!paused && tokenId !== null && r.after.paused) {
          cli.print(forTerminal(`note: organization '${opts.org}' itself is still paused`));
        }
      } finally {
        await ctx.close();
      }
    });
}

export function register(program: Command, cli: Cli): void {
  command(program, cli, true);
}

export function registerResume(program: Command, cli: Cli): void {
  command(program, cli, false);
}
