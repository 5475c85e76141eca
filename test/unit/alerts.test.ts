// The alerting rules (deploy/prometheus/alerts.yml) as Prometheus checks them: `promtool check rules`,
// and `promtool test rules` on alerts.test.yml, whose cases fire each alert and keep it quiet on a
// healthy series. Each alert has a severity, a summary and a runbook section in docs/operations.md, and
// a test case where it fires and one where it stays quiet. The Grafana dashboard is a dashboard Grafana
// imports, and names no metric outside a PromQL expression this file can read. Without promtool these
// fail (they do not skip): Debian's prometheus package has it, and .ci/run installs it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';
import {
  ALERTS_FILE,
  ALERTS_TEST_FILE,
  alertRules,
  grafanaDashboard,
  grafanaExpressions,
  grafanaPanels,
  metricNames,
  promtool,
} from '../helpers/promql.ts';

const OPERATIONS = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');

/** The `###` headings of docs/operations.md's `## Alerts` section. */
function alertSections(): string[] {
  const section = /^## Alerts\n([\s\S]*?)(?=^## )/m.exec(OPERATIONS)?.[1] ?? '';
  return [...section.matchAll(/^### (.+)$/gm)].map((m) => (m[1] ?? '').trim());
}

interface AlertCase {
  alertname: string;
  exp_alerts?: unknown[];
}

function alertCases(): AlertCase[] {
  const doc = parse(readFileSync(ALERTS_TEST_FILE, 'utf8')) as {
    tests: { alert_rule_test?: AlertCase[] }[];
  };
  return doc.tests.flatMap((t) => t.alert_rule_test ?? []);
}

describe('deploy/prometheus/alerts.yml', () => {
  it('passes promtool check rules', () => {
    const r = promtool(['check', 'rules', ALERTS_FILE]);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('passes its promtool unit tests (alerts.test.yml)', () => {
    const r = promtool(['test', 'rules', ALERTS_TEST_FILE]);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('SUCCESS');
  });

  it('covers each condition of the runbook, each alert with a severity, a summary and its section', () => {
    const rules = alertRules();
    expect(rules.map((r) => r.alert).sort()).toEqual(
      [
        'LearnerTransferTokenRevoked',
        'LearnerTransferOrgPausedForHours',
        'LearnerTransferRedisRefusingWrites',
        'LearnerTransferSpoolNotEmptying',
        'LearnerTransferRepairKeepsFindingStranded',
        'LearnerTransferNoProgress',
        'LearnerTransferTargetDown',
      ].sort(),
    );
    // One section per alert, and no section without its alert.
    expect(alertSections().sort()).toEqual(rules.map((r) => r.alert).sort());
    for (const r of rules) {
      expect(['critical', 'warning'], r.alert).toContain(r.labels?.severity);
      expect(r.annotations?.summary, r.alert).toBeTruthy();
      expect(r.annotations?.runbook, r.alert).toBe(`docs/operations.md#${r.alert.toLowerCase()}`);
      expect(metricNames(r.expr).length, `${r.alert}: ${r.expr}`).toBeGreaterThan(0);
    }
  });

  it('has a unit test case where each alert fires and one where it stays quiet', () => {
    const cases = alertCases();
    for (const { alert } of alertRules()) {
      const mine = cases.filter((c) => c.alertname === alert);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length > 0),
        `${alert} fires in a case`,
      ).toBe(true);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length === 0),
        `${alert} is quiet in a case`,
      ).toBe(true);
    }
  });
});

describe('metricNames', () => {
  it('finds the selected metrics, not functions, keywords, labels, strings or ranges', () => {
    expect(
      metricNames(
        'sum by (org) (rate(lt_a_total{org=~"$org",x="sum"}[$__rate_interval])) > 0 and on (org) ' +
          '(max by (org) (lt_b) == 1) unless changes((lt_c or lt_d * 0)[30m:1m]) > 4 * 3600 ' +
          'or histogram_quantile(0.95, sum by (le) (lt_e_bucket offset 1h))',
      ).sort(),
    ).toEqual(['lt_a_total', 'lt_b', 'lt_c', 'lt_d', 'lt_e_bucket']);
  });
});

describe('deploy/grafana/learner-transfer.json', () => {
  it('is a dashboard with PromQL targets for progress, ETA, budget, outcomes, 429s, spool and Redis', () => {
    const d = grafanaDashboard();
    expect(d.uid).toBe('learner-transfer');
    const panels = grafanaPanels(d).filter((p) => p.type !== 'row');
    for (const p of panels) expect((p.targets ?? []).length, p.title).toBeGreaterThan(0);
    const names = new Set(grafanaExpressions(d).flatMap(metricNames));
    for (const wanted of [
      'lt_learners',
      'lt_eta_seconds',
      'lt_budget_limit',
      'lt_budget_remaining',
      'lt_transfer_request_duration_seconds_count',
      'lt_spool_entries',
      'learner_transfer_redis_writable',
    ]) {
      expect([...names], wanted).toContain(wanted);
    }
    expect(grafanaExpressions(d).join('\n')).toContain('outcome="rate-limited"');
    // Only the tool's own metrics, and Prometheus's `up`: a stray word would be a name no scrape has.
    for (const name of names) expect(name).toMatch(/^(lt_|learner_transfer_)|^up$/);
    // Panel ids are unique (Grafana keys its links and edits on them).
    const ids = grafanaPanels(d).map((p) => (p as { id?: number }).id);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
