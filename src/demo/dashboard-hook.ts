// After the demo's run, the dashboard stays up for a look, with workers serving the queue so a retry
// clicked there is carried out.
import type { AppContext } from '../app/context.ts';
import { buildDashboard } from '../dashboard/server.ts';
import { startWorkers } from '../worker/run-workers.ts';

export interface DemoDashboard {
  url: string;
  close(): Promise<void>;
}

export async function startDemoDashboard(ctx: AppContext, port: number): Promise<DemoDashboard> {
  const app = await buildDashboard(ctx, { token: undefined, readToken: undefined });
  let address: string;
  try {
    address = await app.listen({ port, host: '127.0.0.1' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    // The port is taken (another demo?): any free port will do for a look.
    address = await app.listen({ port: 0, host: '127.0.0.1' });
  }
  const workers = startWorkers(ctx, {
    orgs: ctx.config.orgs,
    concurrency: ctx.config.concurrency,
    untilIdle: false,
  });
  return {
    url: address.replace('127.0.0.1', 'localhost').replace(/\/$/, '') + '/',
    async close() {
      await workers.stop();
      await app.close();
    },
  };
}
