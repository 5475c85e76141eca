import { Command } from 'commander';
import { requireOrg } from '../app/context.ts';
import { formatRepair, repairOrg } from '../ops/actions/repair.ts';
import { EXIT } from './shared.ts';
import type { Cli } from './io.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('repair')
    .description(
      'Find learners waiting with no job (a crash between two writes) and jobs with no record, and repair them (work also runs this every REPAIR_INTERVAL)',
    )
    .option('--org <key...>', 'only these organizations')
    .option('--dry-run', 'only report what is found; exit 1 when anything is')
    .action(async (opts: { org?: string[]; dryRun?: boolean }) => {
      const config = cli.config({ requireTokens: true });
      const orgs = opts.org ? opts.org.map((o) => requireOrg(config, o)) : [...config.orgs];
      const ctx = await cli.context(config);
      try {
        let found = 0;
        for (const org of orgs) {
          const r = await repairOrg(ctx, org, { dryRun: opts.dryRun === true });
          found += r.stranded + r.orphanJobs;
          cli.print(formatRepair(r));
        }
        cli.print(
          found === 0
            ? 'nothing to repair: every waiting learner has a job, every job a record'
            : opts.dryRun
              ? `${found} to repair: run 'learner-transfer repair' (or let work do it)`
              : `repaired ${found}`,
        );
        cli.exitCode = opts.dryRun && found > 0 ? EXIT.failures : EXIT.ok;
      } finally {
        await ctx.close();
      }
    });
}
