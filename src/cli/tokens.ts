import { Command } from 'commander';
import { requireOrg } from '../app/context.ts';
import { humanizeMs } from '../core/duration.ts';
import { rebindToken } from '../limiter/token-orgs.ts';
import { orgKeyOption, tokenIdOption } from './parsers.ts';
import type { Cli } from './io.ts';

export function register(program: Command, cli: Cli): void {
  const tokens = program
    .command('tokens')
    .description(
      'Show token ids (fingerprints, never secrets), unpause refused tokens, bind a token to another organization',
    );
  tokens
    .command('list')
    .description('Token ids per organization with their budget state')
    .action(async () => {
      const config = cli.config({ requireTokens: true });
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
    });
  tokens
    .command('unpause')
    .description('Lift the pause of tokens refused with 401 (after fixing LEARNER_API_TOKENS)')
    .requiredOption('--org <key>', 'organization')
    .option('--token <id>', 'one token id (default: every token of the organization)')
    .action(async (opts: { org: string; token?: string }) => {
      const config = cli.config({ requireTokens: true });
      requireOrg(config, opts.org);
      const ctx = await cli.context(config);
      try {
        const ids = opts.token
          ? [opts.token]
          : config.tokens.filter((t) => t.org === opts.org).map((t) => t.id);
        for (const id of ids) await ctx.budget.unblock(opts.org, id);
        cli.print(`unpaused ${ids.length} token${ids.length === 1 ? '' : 's'} of ${opts.org}`);
      } finally {
        await ctx.close();
      }
    });
  tokens
    .command('rebind')
    .description(
      'Bind a token to another organization key in Redis (after it moved in LEARNER_API_TOKENS): one token, one organization',
    )
    .requiredOption('--token <id>', 'token id (12 hex digits, as tokens list shows it)', tokenIdOption)
    .requiredOption('--org <key>', 'the organization key the token belongs to now', orgKeyOption)
    .action(async (opts: { token: string; org: string }) => {
      const config = cli.config();
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
    });
}
