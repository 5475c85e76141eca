import { requireOrg } from '../app/context.ts';
import { humanizeMs } from '../core/duration.ts';
import { rebindToken } from '../limiter/token-orgs.ts';
import type { Cli } from './io.ts';

export async function listTokens(cli: Cli): Promise<void> {
  const config = await cli.config({ requireTokens: true });
  const ctx = await cli.context(config);
  try {
    for (const org of config.orgs) {
      const view = await ctx.budget.peek(
        org,
        config.tokens.filter((t) => t.org === org).map((t) => t.id),
      );
      for (const t of view.tokens) {
        cli.print(
          `${org} ${t.tokenId} ${t.remaining}/${t.limit} left${t.blocked ? ` blocked (${t.blocked.reason})` : ''}`,
        );
      }
    }
  } finally {
    await ctx.close();
  }
}

export async function unpauseTokens(cli: Cli, opts: { org: string; token?: string }): Promise<void> {
  const config = await cli.config({ requireTokens: true });
  requireOrg(config, opts.org);
  const ctx = await cli.context(config);
  try {
    const ids = opts.token ? [opts.token] : config.tokens.filter((t) => t.org === opts.org).map((t) => t.id);
    for (const id of ids) await ctx.budget.unblock(opts.org, id);
    cli.print(`unpaused ${ids.length} token${ids.length === 1 ? '' : 's'} of ${opts.org}`);
  } finally {
    await ctx.close();
  }
}

export async function rebindCommand(cli: Cli, opts: { token: string; org: string }): Promise<void> {
  const config = await cli.config();
  const ctx = await cli.context(config);
  try {
    const previous = await rebindToken(ctx.redis, ctx.keys.prefix, opts.token, opts.org);
    cli.print(
      `token ${opts.token} is bound to '${opts.org}'` +
        (previous === null ? ' (it was bound to none)' : ` (it was bound to '${previous}')`),
    );
    if (previous !== null && previous !== opts.org) {
      // The limiter keeps a token's window under its organization: the new one starts empty.
      cli.print(
        `note: what the token spent under '${previous}' in the last ${humanizeMs(config.limitPerToken.windowMs)} ` +
          `does not count under '${opts.org}': if it was used lately, the service may answer 429 for a ` +
          `while (waited out, no attempt lost)`,
      );
    }
  } finally {
    await ctx.close();
  }
}
