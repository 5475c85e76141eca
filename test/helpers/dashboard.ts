// A run with failures for the dashboard tests: some learners transferred, two forbidden (403), two
// unknown (404), and four that failed with 500 until their attempts ran out while the simulator's error
// rate was 1 (it is 0 again afterwards, so retrying them succeeds). Built with the real pipeline.
import type { FastifyInstance, InjectOptions } from 'fastify';
import { newRunId } from '../../src/outcomes/runs.ts';
import { startWorkers, type WorkOptions } from '../../src/worker/run-workers.ts';
import { startHarness, type Harness } from './pipeline.ts';

export const DASHBOARD_TOKEN = 'dash-secret-0123456789abcdef';
export const TRANSFERRED = [2, 3];
export const FORBIDDEN = [5, 8];
export const MISSING = [999_998, 999_999];
export const SERVER_ERROR = [11, 12, 14, 15];
export const SECRETS = ['sim-acme-1', 'sim-acme-2', DASHBOARD_TOKEN];

export interface Scenario {
  h: Harness;
  runId: string;
}

export async function drain(h: Harness, extra: Partial<WorkOptions> = {}): Promise<void> {
  const handle = startWorkers(h.ctx, {
    orgs: ['acme'],
    concurrency: 5,
    untilIdle: true,
    idleCheckMs: 100,
    ...extra,
  });
  const result = await handle.done;
  if (result.reason !== 'idle') throw new Error(`workers stopped: ${result.reason}`);
}

export async function failureScenario(
  options: { env?: Record<string, string>; onOutcome?: WorkOptions['onOutcome'] } = {},
): Promise<Scenario> {
  const h = await startHarness({
    tag: 'dash',
    sim: { learners: 300, forbiddenLearnerIds: FORBIDDEN },
    // Eight failures of ten on purpose: the error budget would halt acme (guard-rails.md), so it is off here,
    // as an operator turns it off (limits set --halt-at off) to retry a run known to have failed.
    env: { ATTEMPTS: '2', BACKOFF: '20ms', DASHBOARD_TOKEN, HALT_AT: 'off', ...options.env },
  });
  const runId = newRunId();
  await h.ctx.runs.create({ id: runId, kind: 'csv', source: 'cohort.csv', orgs: ['acme'] });
  const items = (ids: number[]) => ids.map((learnerId) => ({ org: 'acme', learnerId, source: 'cohort.csv' }));
  const extra = options.onOutcome ? { onOutcome: options.onOutcome } : {};
  await h.ctx.producer.add(items([...TRANSFERRED, ...FORBIDDEN, ...MISSING]), runId);
  await drain(h, extra);
  h.sim.setFaults({ errorRate: 1 });
  await h.ctx.producer.add(items(SERVER_ERROR), runId);
  await drain(h, extra);
  h.sim.setFaults({});
  return { h, runId };
}

export const bearer = { authorization: `Bearer ${DASHBOARD_TOKEN}` };

export function basic(password: string, user = 'operator'): Record<string, string> {
  return { authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` };
}

/** GET a page with the token and read its CSRF token from the meta tag. */
export async function csrfFromPage(app: FastifyInstance, url = '/failures'): Promise<string> {
  const page = await app.inject({ url, headers: bearer });
  const m = /<meta name="csrf-token" content="([^"]+)"/.exec(page.body);
  if (!m?.[1]) throw new Error(`no csrf-token meta in ${url} (status ${page.statusCode})`);
  return m[1];
}

export async function authed(app: FastifyInstance, opts: InjectOptions) {
  return app.inject({ ...opts, headers: { ...bearer, ...opts.headers } });
}
