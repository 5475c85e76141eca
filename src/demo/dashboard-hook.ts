// The demo keeps the dashboard up for a look. Until the dashboard exists this says so and returns null.
import type { AppContext } from '../app.ts';

export async function startDemoDashboard(_ctx: AppContext, _port: number): Promise<string | null> {
  process.stdout.write('dashboard not available in this build\n');
  return null;
}
