import { requireOrg } from '../app/context.ts';
import { formatRepair, repairOrg } from '../ops/actions/repair.ts';
import { EXIT } from './shared.ts';
import type { Cli } from './io.ts';

export async function repairCommand(cli: Cli, opts: { org?: string[]; dryRun?: boolean }): Promise<void> {
  const config = await cli.config({ requireTokens: true });
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
}
