// `demo` in the command table: its flags and help. The command itself is cli/demo.ts,
// imported when it runs.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import type { Cli } from '../io.ts';

/**
 * jobs.example.csv, at the root of the package: the nearest above this file, which is two folders down in
 * src/ and dist/ and further in a checkout's own build (bin/learner-transfer.js).
 */
function exampleCsv(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const file = join(dir, 'jobs.example.csv');
    if (existsSync(file)) return file;
    if (dirname(dir) === dir) return 'jobs.example.csv';
  }
}

export function register(program: Command, cli: Cli): void {
  program
    .command('demo')
    .description(
      'See the tool work: the built-in simulator, Redis, jobs.example.csv, workers under compressed limits, a report',
    )
    .option('--csv <file>', 'CSV to transfer', exampleCsv())
    .option('--limit-per-token <rate>', 'compressed per-token limit', '10/4s')
    .option('--limit-per-org <rate>', 'compressed per-organization limit', '16/4s')
    .option('--burst <N|P%|off>', 'pacing: what a bucket sends at once before one per window/limit', '25%')
    .option('--out <dir>', 'where report files go (default out/demo-<run>)')
    .option('--no-dashboard', 'exit at the end instead of keeping the dashboard up')
    .option('--keep', "leave the demo's state in Redis when it ends (Ctrl-C too), to look at it later")
    .option('--dashboard-port <n>', 'dashboard port', '8080')
    .action(async (opts) => (await import('../demo.ts')).demoCommand(cli, opts));
}
