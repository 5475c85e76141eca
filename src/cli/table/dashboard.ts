// `dashboard` in the command table: its flags and help. The command itself is cli/dashboard.ts,
// imported when it runs.
import type { Command } from 'commander';
import type { Cli } from '../io.ts';
import { portOption } from '../parsers.ts';

export function register(program: Command, cli: Cli): void {
  program
    .command('dashboard')
    .description('Serve the retry dashboard: failures by reason, one-click retry, live budgets, /metrics')
    .option('--port <n>', 'port to listen on (0 picks a free one)', portOption('--port'), 8080)
    .option('--host <h>', 'address to listen on (not loopback: needs DASHBOARD_TOKEN)', '127.0.0.1')
    .option('--read-only', 'hide and refuse every change (retries, pause, limits), whatever the token')
    .action(async (flags) => (await import('../dashboard.ts')).dashboardCommand(cli, flags));
}
