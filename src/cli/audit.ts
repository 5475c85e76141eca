import { Command, Option } from 'commander';
import { requireOrg } from '../app/context.ts';
import { exportAudit } from '../ops/audit-export.ts';
import { requireReadableRunId } from './shared.ts';
import type { Cli } from './io.ts';
import { learnerIdOption } from './parsers.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('audit')
    .description(
      'Export the audit record of every transfer (groups removed and added, authorizations revoked) as NDJSON',
    )
    .option('--org <key...>', 'only these organizations')
    .option('--run <id>', 'only transfers of this run')
    .addOption(new Option('--learner <id>', 'only this learner').argParser(learnerIdOption('--learner')))
    .option('--out <file>', 'write here instead of stdout')
    .action(async (opts: { org?: string[]; run?: string; learner?: number; out?: string }) => {
      const config = cli.config();
      const orgs = opts.org ? opts.org.map((o) => requireOrg(config, o)) : [...config.orgs];
      const ctx = await cli.context(config);
      try {
        await requireReadableRunId(ctx.runs, '--run', opts.run);
        const n = await exportAudit(
          ctx.store,
          { orgs, runId: opts.run, learnerId: opts.learner },
          opts.out,
          cli.stdout,
        );
        if (opts.out) cli.print(`${n} audit record${n === 1 ? '' : 's'} -> ${opts.out}`);
      } finally {
        await ctx.close();
      }
    });
}
