// `tokens list|unpause|rebind` in the command table: its flags and help.
// The command itself is cli/tokens.ts, imported when it runs.
import type { Command } from 'commander';
import type { Cli } from '../io.ts';
import { orgKeyOption, tokenIdOption } from '../parsers.ts';

export function register(program: Command, cli: Cli): void {
  const tokens = program
    .command('tokens')
    .description(
      'Show token ids (fingerprints, never secrets), unpause refused tokens, bind a token to another organization',
    );
  tokens
    .command('list')
    .description('Token ids per organization with their budget state')
    .action(async () => (await import('../tokens.ts')).listTokens(cli));
  tokens
    .command('unpause')
    .description('Lift the pause of tokens refused with 401 (after fixing LEARNER_API_TOKENS)')
    .requiredOption('--org <key>', 'organization')
    .option('--token <id>', 'one token id (default: every token of the organization)')
    .action(async (opts) => (await import('../tokens.ts')).unpauseTokens(cli, opts));
  tokens
    .command('rebind')
    .description(
      'Bind a token to another organization key in Redis (after it moved in LEARNER_API_TOKENS): one token, one organization',
    )
    .requiredOption('--token <id>', 'token id (12 hex digits, as tokens list shows it)', tokenIdOption)
    .requiredOption('--org <key>', 'the organization key the token belongs to now', orgKeyOption)
    .action(async (opts) => (await import('../tokens.ts')).rebindCommand(cli, opts));
}
