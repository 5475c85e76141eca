// `learner-transfer dashboard`: the retry dashboard. Loopback by default; another address needs
// DASHBOARD_TOKEN, since the dashboard can re-queue work and shows every outcome.

import { isLoopbackAddress } from '../core/http-access.ts';
import { buildDashboard } from '../dashboard/server.ts';
import { LearnerTransferError } from '../core/errors.ts';
import type { Cli } from './io.ts';

interface DashboardFlags {
  port: number;
  host: string;
  readOnly?: boolean;
}

export async function dashboardCommand(cli: Cli, flags: DashboardFlags): Promise<void> {
  const config = await cli.config();
  if (!isLoopbackAddress(flags.host) && !config.dashboardToken) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `--host ${flags.host} is not a loopback address: set DASHBOARD_TOKEN (16 or more characters) so the ` +
        `dashboard asks for it, or keep the default 127.0.0.1 and reach it through an SSH tunnel`,
    );
  }
  const https = Boolean(config.dashboardTlsCert && config.dashboardTlsKey);
  if (!isLoopbackAddress(flags.host) && !https) {
    cli.warn(
      `warning: --host ${flags.host} without TLS: DASHBOARD_TOKEN and every page cross the network in clear; ` +
        `set DASHBOARD_TLS_CERT and DASHBOARD_TLS_KEY, or serve it behind a TLS proxy`,
    );
  }
  const ctx = await cli.context(config);
  const app = await buildDashboard(ctx, { readOnly: Boolean(flags.readOnly) }).catch(async (err: unknown) => {
    await ctx.close();
    throw err;
  });
  try {
    await app.listen({ port: flags.port, host: flags.host });
  } catch (err) {
    await app.close().catch(() => undefined);
    await ctx.close();
    const code = (err as { code?: string }).code;
    throw new LearnerTransferError(
      'LT_USAGE',
      `--port/--host: cannot listen on ${flags.host}:${flags.port} (${code ?? (err as Error).message})`,
      { cause: err },
    );
  }
  const address = app.server.address();
  const actual = typeof address === 'object' && address ? address.port : flags.port;
  const shown = flags.host.includes(':') ? `[${flags.host}]` : flags.host;
  cli.print(
    `dashboard on ${https ? 'https' : 'http'}://${shown}:${actual}/` +
      (config.dashboardToken ? ' (DASHBOARD_TOKEN required)' : ' (no DASHBOARD_TOKEN: loopback only)') +
      (config.dashboardReadToken ? ', viewers with DASHBOARD_READ_TOKEN' : '') +
      (flags.readOnly ? ', read-only' : ''),
  );
  cli.onShutdown(async () => {
    await app.close();
    await ctx.close();
    cli.print('dashboard stopped');
  }, 5_000);
}
