// What the operator's files name: the alerting rules of deploy/prometheus/alerts.yml, the expressions of
// the Grafana dashboard deploy/grafana/learner-transfer.json, and the metric names in a PromQL expression
// (so that a test can check each exists in a real scrape).
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ROOT } from './cli.ts';

export const ALERTS_FILE = join(ROOT, 'deploy', 'prometheus', 'alerts.yml');
export const ALERTS_TEST_FILE = join(ROOT, 'deploy', 'prometheus', 'alerts.test.yml');
export const GRAFANA_FILE = join(ROOT, 'deploy', 'grafana', 'learner-transfer.json');

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export function alertRules(): AlertRule[] {
  const doc = parse(readFileSync(ALERTS_FILE, 'utf8')) as { groups: { rules: AlertRule[] }[] };
  return doc.groups.flatMap((g) => g.rules);
}

interface GrafanaPanel {
  title?: string;
  type?: string;
  targets?: { expr?: string }[];
  panels?: GrafanaPanel[];
}

export interface GrafanaDashboard {
  title: string;
  uid: string;
  panels: GrafanaPanel[];
  templating?: { list?: { name: string; type: string; query?: string | { query?: string } }[] };
}

export function grafanaDashboard(): GrafanaDashboard {
  return JSON.parse(readFileSync(GRAFANA_FILE, 'utf8')) as GrafanaDashboard;
}

/** Every panel, those inside rows included. */
export function grafanaPanels(d: GrafanaDashboard): GrafanaPanel[] {
  return d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** Every PromQL expression of the dashboard: its panels' targets and its variables' queries. */
export function grafanaExpressions(d: GrafanaDashboard): string[] {
  const targets = grafanaPanels(d).flatMap((p) => (p.targets ?? []).map((t) => t.expr ?? ''));
  // A query variable's `label_values(metric, label)` selects `metric` (a datasource variable's query is
  // a plugin's name, not PromQL).
  const variables = (d.templating?.list ?? [])
    .filter((v) => v.type === 'query')
    .map((v) => (typeof v.query === 'string' ? v.query : (v.query?.query ?? '')))
    .map((q) => q.replace(/^\s*label_values\(\s*(.*?)\s*,\s*\w+\s*\)\s*$/, '$1'));
  return [...targets, ...variables].filter((e) => e.trim() !== '');
}

/** PromQL's aggregations, functions and keywords: identifiers that are not metric names. */
const NOT_METRICS = new Set(
  (
    'sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio ' +
    'by without on ignoring group_left group_right and or unless offset bool atan2 ' +
    'abs absent absent_over_time ceil changes clamp clamp_max clamp_min day_of_month day_of_week ' +
    'day_of_year days_in_month delta deriv exp floor histogram_quantile holt_winters hour idelta increase ' +
    'irate label_join label_replace label_values ln log2 log10 minute month predict_linear rate resets ' +
    'round scalar sgn sort sort_desc sqrt time timestamp vector year avg_over_time min_over_time ' +
    'max_over_time sum_over_time count_over_time quantile_over_time stddev_over_time stdvar_over_time ' +
    'last_over_time present_over_time inf nan query_result metrics'
  ).split(' '),
);

/**
 * The metric names an expression selects: strings, label matchers, label lists of by/on/..., ranges and
 * Grafana's variables taken out, what is left that is neither a function nor a keyword. A name written
 * as `{__name__="x"}` is not seen (the files here do not use it).
 */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ');
  const names = new Set<string>();
  for (const m of bare.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const name = m[0];
    // A number's exponent (1e3) or a duration's unit never starts a token here: those are digits first.
    const before = bare[(m.index ?? 0) - 1] ?? ' ';
    if (/[0-9.]/.test(before)) continue;
    if (!NOT_METRICS.has(name)) names.add(name);
  }
  return [...names];
}

/** promtool, or an error that says how to get it (the tests need it: they must not skip). */
export function promtool(args: string[]): { code: number; out: string } {
  const r = spawnSync('promtool', args, { cwd: ROOT, encoding: 'utf8' });
  if (r.error) {
    throw new Error(
      `promtool is not on PATH (${r.error.message}): install Debian's prometheus package ` +
        '(apt-get install prometheus; .ci/run does)',
    );
  }
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

/** The path of the prometheus binary, or an error that says how to get it. */
export function prometheusBinary(): string {
  try {
    execFileSync('prometheus', ['--version'], { stdio: 'ignore' });
    return 'prometheus';
  } catch (err) {
    throw new Error(
      `prometheus is not on PATH (${(err as Error).message}): install Debian's prometheus package ` +
        '(apt-get install prometheus; .ci/run does)',
      { cause: err },
    );
  }
}
