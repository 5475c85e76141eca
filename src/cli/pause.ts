// `pause` and `resume`: stop sending new transfers for an organization (or a token) on every
// worker of every host, and start again. The pause is the organization's policy in Redis: it
// outlives restarts, and acquire reads it in its own step, so no permit is granted after it.

import { cliActor } from '../limiter/control-log.ts';
import { POLICY_RECHECK_MS, seedPolicy } from '../limiter/policy.ts';
import { setPaused } from '../limiter/policy-control.ts';
import { forTerminal } from '../core/terminal-safe.ts';
import { checkOrgAndToken } from './limits.ts';
import type { Cli } from './io.ts';

export async function pauseCommand(
  cli: Cli,
  opts: { org: string; token?: string },
  paused: boolean,
): Promise<void> {
  const config = await cli.config({ requireTokens: true });
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
}
