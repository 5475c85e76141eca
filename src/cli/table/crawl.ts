// `crawl` in the command table: its flags and help. The command itself is cli/crawl.ts,
// imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { autoApproveOption, canaryOption } from '../canary-flags.ts';
import { positiveInt } from '../parsers.ts';

const TARGET_ORG_ID_HELP =
  'numeric id of --org as the list shows it (organizationId); remembered in Redis after the first use; ' +
  'with --from-org it may be left out (it is learned from the list)';

/** The crawl flags, shared with `plan --crawl` (which says where its --target-org-id is remembered). */
export function addCrawlOptions(cmd: Command, targetOrgIdHelp = TARGET_ORG_ID_HELP): Command {
  return cmd
    .option('--org <key>', 'organization to move learners into (a key from LEARNER_API_TOKENS)')
    .addOption(new Option('--target-org-id <n>', targetOrgIdHelp).argParser(positiveInt('--target-org-id')))
    .addOption(
      new Option('--from-org <id>', 'only learners of this numeric organization id').argParser(
        positiveInt('--from-org'),
      ),
    )
    .option('--active-only', 'only learners with isActive 1')
    .option(
      '--with-user-only',
      'only learners with a user attached (the spec: transfers are meant for those)',
    )
    .addOption(
      new Option('--limit <n>', 'select at most this many learners').argParser(positiveInt('--limit')),
    )
    .addOption(
      new Option('--concurrency <n>', 'pages read at once')
        .argParser(positiveInt('--concurrency', 64))
        .default(4),
    );
}

export function register(program: Command, cli: Cli): void {
  addCrawlOptions(
    program
      .command('crawl')
      .description(
        'Walk the learner list, select learners by filters and enqueue them into --org (resumable)',
      ),
  )
    .option('--crawl-id <id>', 'cursor id (default: derived from the filters, so the same command resumes)')
    .option('--restart', 'start over even if an unfinished crawl with this id exists')
    .option('--dry-run', 'only plan: count and ETA, no queue writes, no transfers')
    .option('--quiet', 'no progress output')
    .addOption(canaryOption())
    .addOption(autoApproveOption())
    .action(async (opts) => (await import('../crawl.ts')).runCrawlCommand(cli, opts));
}
