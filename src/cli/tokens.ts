import { Command } from 'commander';
import { createContext, requireOrg } from '../app.ts';
import { loadCliConfig } from './shared.ts';

export function register(program: Command): void {
  const tokens = program
    .command('tokens')
    .description('Show token ids (fingerprints, never secrets) and unpause refused tokens');
  tokens
    .command('list')
    .description('Token ids per organization with their budget state')
    .action(async () => {
      const config = loadCliConfig({ requireTokens: true });
      const ctx = await createContext(config);
      try {
        for (const org of config.orgs) {
          const view = await ctx.budget.peek(
            org,
            config.tokens.filter((t) => t.org === org).map((t) => t.id),
          );
          for (const t of view.tokens) {
            console.log(
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
      const config = loadCliConfig({ requireTokens: true });
      requireOrg(config, opts.org);
      const ctx = await createContext(config);
      try {
        const ids = opts.token
          ? [opts.token]
          : config.tokens.filter((t) => t.org === opts.org).map((t) => t.id);
        for (const id of ids) await ctx.budget.unblock(opts.org, id);
        console.log(`unpaused ${ids.length} token${ids.length === 1 ? '' : 's'} of ${opts.org}`);
      } finally {
        await ctx.close();
      }
    });
}
