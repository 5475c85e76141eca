// A real Prometheus (Debian's `prometheus` binary) scraping a real `work --metrics-port` and a real
// dashboard, both the CLI as a child process, against the simulator and a Redis prefix of this file's
// own, with deploy/prometheus/alerts.yml loaded. It proves what the operator's files rely on: both
// targets are up; every metric the alerting rules and the Grafana dashboard
// (deploy/grafana/learner-transfer.json) name exists in what was scraped; every rule evaluates without
// error on that data; and a pause shows as lt_paused_seconds > 0. In the `serial` project (vitest.config.ts):
// one Prometheus, two CLIs and a transfer run at once are better not doubled beside the other files.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { track } from '../helpers/children.ts';
import { runCommand, spawnCli, waitExit } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import {
  ALERTS_FILE,
  alertRules,
  grafanaDashboard,
  grafanaExpressions,
  metricNames,
  prometheusBinary,
} from '../helpers/promql.ts';
import { freePort } from '../helpers/redis-server.ts';
import { waitFor } from '../helpers/wait.ts';

type Cli = ReturnType<typeof spawnCli>;

let h: Harness;
let dir: string;
const stops: (() => Promise<unknown>)[] = [];
let promUrl = '';

async function started(child: Cli, line: string): Promise<void> {
  await waitFor(
    `'${line}' on the output (or the exit)`,
    () => (child.output.stderr + child.output.stdout).includes(line) || child.exitCode !== null,
    (up) => up,
    { everyMs: 100, show: () => child.output.stderr.slice(-1000) },
  );
  expect(child.exitCode, child.output.stderr).toBeNull();
}

/** A CLI child stopped with SIGTERM at the end, by its pid. */
function cli(args: string[]): Cli {
  const child = spawnCli(args, h.env);
  const exit = waitExit(child, 60_000);
  stops.push(() => {
    child.kill('SIGTERM');
    return exit;
  });
  return child;
}

/** The prometheus binary on a temp config and TSDB; stopped with SIGTERM at the end. */
async function startPrometheus(targets: { work: number; dashboard: number }): Promise<string> {
  const bin = prometheusBinary();
  const port = await freePort();
  const config = join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    [
      'global:',
      '  scrape_interval: 1s',
      '  scrape_timeout: 1s',
      '  evaluation_interval: 1s',
      `rule_files: [${JSON.stringify(ALERTS_FILE)}]`,
      'scrape_configs:',
      // The job names of deploy/prometheus/scrape.yml.
      '  - job_name: learner-transfer-work',
      `    static_configs: [{ targets: ['127.0.0.1:${targets.work}'] }]`,
      '  - job_name: learner-transfer-dashboard',
      `    static_configs: [{ targets: ['127.0.0.1:${targets.dashboard}'] }]`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(
    bin,
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(dir, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  track(child);
  let log = '';
  child.stderr?.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  stops.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    'prometheus to answer /-/ready',
    () =>
      request(`${url}/-/ready`)
        .then(async (r) => (await r.body.text(), r.statusCode))
        .catch(() => (child.exitCode !== null ? -1 : 0)),
    (status) => status === 200 || status === -1,
    { everyMs: 200, timeoutMs: 20_000, show: () => log.slice(-1000) },
  );
  expect(child.exitCode, log).toBeNull();
  return url;
}

async function api<T>(path: string): Promise<T> {
  const r = await request(`${promUrl}${path}`);
  const body = (await r.body.json()) as { status: string; data: T; error?: string };
  expect(body.status, `${path}: ${body.error ?? ''}`).toBe('success');
  return body.data;
}

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}
const query = (q: string) =>
  api<{ result: Sample[] }>(`/api/v1/query?query=${encodeURIComponent(q)}`).then((d) => d.result);
const scrapedNames = () => api<string[]>('/api/v1/label/__name__/values');

/** Every metric the rules and the dashboard name. */
function namedMetrics(): string[] {
  const exprs = [...alertRules().map((r) => r.expr), ...grafanaExpressions(grafanaDashboard())];
  return [...new Set(exprs.flatMap(metricNames))].sort();
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'lt-prometheus-'));
  h = await startHarness({
    tag: 'prom',
    sim: { learners: 60 },
    env: { LOG_LEVEL: 'info', LIMIT_PER_TOKEN: '50/2s', LIMIT_PER_ORG: '100/2s' },
  });
});
afterAll(async () => {
  // Prometheus first (it scrapes the others), then the CLIs: each by its own pid.
  for (const stop of stops.reverse()) await stop().catch(() => undefined);
  await h?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('a real Prometheus scraping work and the dashboard', () => {
  it('sees both up, every metric the alerts and the Grafana dashboard name, and rules that evaluate', async () => {
    const named = namedMetrics();
    // The files name something, and the parse found the metrics of each condition.
    for (const m of ['lt_token_paused', 'lt_spool_oldest_entry_age_seconds', 'lt_repair_found_total'])
      expect(named).toContain(m);

    const ids = learnersNotIn('acme', 12);
    await h.enqueueIds(ids);
    const workPort = await freePort();
    const dashboardPort = await freePort();
    const work = cli(['work', '--metrics-port', String(workPort), '--concurrency', '4']);
    const dashboard = cli(['dashboard', '--port', String(dashboardPort)]);
    await started(work, 'workers started');
    await started(dashboard, 'dashboard on');
    promUrl = await startPrometheus({ work: workPort, dashboard: dashboardPort });

    const up = await waitFor(
      'up == 1 for both jobs',
      () => query('up'),
      (r) => r.length === 2 && r.every((s) => s.value[1] === '1'),
      { everyMs: 500, timeoutMs: 20_000 },
    );
    expect(up.map((s) => s.metric.job).sort()).toEqual([
      'learner-transfer-dashboard',
      'learner-transfer-work',
    ]);

    // Transfers happened (the histogram has series) and were scraped, along with everything else named.
    const names = await waitFor(
      'every metric named by alerts.yml and the Grafana dashboard in the scrape',
      scrapedNames,
      (have) => named.every((m) => have.includes(m)),
      {
        everyMs: 500,
        timeoutMs: 20_000,
        show: (have) => `missing ${JSON.stringify(named.filter((m) => !have.includes(m)))}`,
      },
    );
    expect(named.filter((m) => !names.includes(m))).toEqual([]);
    // The run ends, as Prometheus sees it: every learner in a final state, nothing left.
    await waitFor(
      `the ${ids.length} learners of acme final in Prometheus`,
      () => query('sum(lt_learners{org="acme",outcome!~"queued|retrying"})'),
      (r) => Number(r[0]?.value[1] ?? 0) === ids.length,
      { everyMs: 500, timeoutMs: 20_000 },
    );
    await waitFor(
      'no learner of acme left in Prometheus',
      () => query('sum(lt_learners{org="acme",outcome=~"queued|retrying"}) > 0'),
      (r) => r.length === 0,
      { everyMs: 500, timeoutMs: 10_000 },
    );

    // Every rule is loaded and evaluates on this data without an error.
    const rules = await waitFor(
      'every rule evaluated once',
      () =>
        api<{ groups: { rules: { name: string; health: string; lastError?: string }[] }[] }>(
          '/api/v1/rules',
        ).then((d) => d.groups.flatMap((g) => g.rules)),
      (r) => r.length > 0 && r.every((x) => x.health !== 'unknown'),
      { everyMs: 500, timeoutMs: 10_000 },
    );
    expect(rules.map((r) => r.name).sort()).toEqual(
      alertRules()
        .map((r) => r.alert)
        .sort(),
    );
    for (const r of rules) expect(r.health, `${r.name}: ${r.lastError ?? ''}`).toBe('ok');
    // A healthy run that ended: no alert firing or pending (the next evaluation drops one pending from
    // the run's first seconds, when nothing had finished yet).
    await waitFor(
      'no alert firing or pending',
      () => query('ALERTS'),
      (r) => r.length === 0,
      {
        everyMs: 500,
        timeoutMs: 5_000,
      },
    );

    // A person pauses acme: the dashboard's gauge counts the seconds, as the alert reads it.
    const paused = await runCommand(['pause', '--org', 'acme'], h.env);
    expect(paused.code, paused.stderr).toBe(0);
    await waitFor(
      'lt_paused_seconds{org="acme",scope="org"} > 0 in Prometheus',
      () => query('lt_paused_seconds{org="acme",scope="org"} > 0'),
      (r) => r.length === 1,
      { everyMs: 500, timeoutMs: 15_000 },
    );
  }, 60_000);
});
