import { Command } from 'commander';
import { createContext, requireOrg } from '../app/context.ts';
import { formatRepair, repairOrg } from '../ops/repair.ts';
import { EXIT, loadCliConfig } from './shared.ts';

export function register(program: Command): void {
  program
    .command('repair')
    .description(
      'Find learners waiting with no job (a crash between two writes) and jobs with no record, and repair them (work also runs this every REPAIR_INTERVAL)',
    )
    .option('--org <key...>', 'only these organizations')
    .option('--dry-run', 'only report what is found; exit 1 when anything is')
    .action(async (opts: { org?: string[]; dryRun?: boolean }) => {
      const config = loadCliConfig({ requireTokens: true });
      const orgs = opts.org ? opts.org.map((o) => requireOrg(config, o)) : [...config.orgs];
      const ctx = await createContext(config);
      try {
        let found = 0;
        for (const org of orgs) {
          const r = await repairOrg(ctx, org, { dryRun: opts.dryRun === true });
          found += r.stranded + r.orphanJobs;
          console.log(formatRepair(r));
        }
        console.log(
          found === 0
            ? 'nothing to repair: every waiting learner has a job, every job a record'
            : opts.dryRun
              ? `${found} to repair: run 'learner-transfer repair' (or let work do it)`
              : `repaired ${found}`,
        );
        process.exitCode = opts.dryRun && found > 0 ? EXIT.failures : EXIT.ok;
      } finally {
        await ctx.close();
      }
    });
}
