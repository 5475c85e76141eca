import { Command, Option } from 'commander';
import { requireOrg } from '../app/context.ts';
import { formatSplit, writeReport, writeSplit } from '../ops/report.ts';
import { BUCKETS } from '../outcomes/record.ts';
import { requireReadableRunId } from './shared.ts';
import { compactedRunNote } from '../ops/run-retention.ts';
import type { Cli } from './io.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('report')
    .description('One row per learner with its outcome code and details, or split result files')
    .option('--run <id>', 'only this run')
    .addOption(new Option('--status <code>', 'only this outcome code or state').choices([...BUCKETS]))
    .addOption(new Option('--format <format>', 'output format').choices(['csv', 'ndjson']).default('csv'))
    .option('--out <file>', 'write here instead of stdout')
    .option('--split <dir>', 'write successes.csv, failures.csv, pending.csv and cancelled.csv into DIR')
    .option('--org <key...>', 'only these organizations')
    .action(
      async (opts: {
        run?: string;
        status?: string;
        format: 'csv' | 'ndjson';
        out?: string;
        split?: string;
        org?: string[];
      }) => {
        const config = cli.config();
        const orgs = opts.org ? opts.org.map((o) => requireOrg(config, o)) : [...config.orgs];
        const ctx = await cli.context(config);
        try {
          await requireReadableRunId(ctx.runs, '--run', opts.run);
          // A run past RUN_RETENTION is not unknown: its rows come from the records, and it says so.
          const note = opts.run ? compactedRunNote(await ctx.runs.get(opts.run)) : undefined;
          if (note) cli.warn(note);
          const filter = { orgs, runId: opts.run, status: opts.status };
          if (opts.split) {
            const s = await writeSplit(ctx.store, filter, opts.split);
            cli.print(formatSplit(s));
          } else {
            const rows = await writeReport(ctx.store, filter, {
              format: opts.format,
              out: opts.out,
              stdout: cli.stdout,
            });
            if (opts.out) cli.print(`${rows} rows -> ${opts.out}`);
          }
        } finally {
          await ctx.close();
        }
      },
    );
}
