// The `work` process's spool gauges and repair counter (src/ops/metrics/work-metrics.ts), as /metrics shows
// them, and the spool's oldest outstanding entry they read (worker/spool.ts), on a real temp directory.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createRegistry } from '../../src/ops/metrics/prometheus.ts';
import {
  countRepair,
  repairCounter,
  spoolGauges,
  type SpoolState,
} from '../../src/ops/metrics/work-metrics.ts';
import { Spool } from '../../src/worker/spool.ts';
import type { FinishArgs } from '../../src/outcomes/store.ts';

const dir = mkdtempSync(join(tmpdir(), 'lt-work-metrics-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const args = (learnerId: number): FinishArgs => ({
  org: 'acme',
  learnerId,
  runId: 'r1',
  at: Date.now(),
  attemptId: `a${learnerId}`,
});

describe('spool gauges', () => {
  it('show the entries not yet in Redis and the age of the oldest, 0 when empty', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    let state: SpoolState = { entries: 0, oldestAt: null };
    spoolGauges(
      registry,
      () => state,
      () => 1_000_000,
    );
    let text = await registry.metrics();
    expect(text).toContain('lt_spool_entries 0');
    expect(text).toContain('lt_spool_oldest_entry_age_seconds 0');
    state = { entries: 3, oldestAt: 1_000_000 - 90_500 };
    text = await registry.metrics();
    expect(text).toContain('lt_spool_entries 3');
    expect(text).toContain('lt_spool_oldest_entry_age_seconds 90.5');
  });

  it('read the oldest outstanding entry of a real spool: the first still waiting, none once all are done', async () => {
    const spool = await Spool.open(dir, 'wm');
    try {
      expect(spool.oldestAt).toBeNull();
      const before = Date.now();
      const first = await spool.append(args(1));
      await new Promise((r) => setTimeout(r, 20));
      const second = await spool.append(args(2));
      const oldest = spool.oldestAt;
      expect(oldest).not.toBeNull();
      expect(oldest!).toBeGreaterThanOrEqual(before);
      expect(oldest!).toBeLessThanOrEqual(Date.now());
      await spool.done(first);
      // The second is now the oldest, written at least 20 ms after the first.
      expect(spool.oldestAt!).toBeGreaterThanOrEqual(oldest! + 15);
      await spool.done(second);
      expect(spool.oldestAt).toBeNull();
      expect(spool.outstanding).toBe(0);
    } finally {
      await spool.close();
    }
  });
});

describe('repair counter', () => {
  it('starts both kinds at 0 and counts what each sweep found', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    const counter = repairCounter(registry);
    let text = await registry.metrics();
    expect(text).toContain('lt_repair_found_total{kind="stranded"} 0');
    expect(text).toContain('lt_repair_found_total{kind="orphan-job"} 0');
    const report = { org: 'acme', readded: 0, recorded: 0, examples: [] };
    countRepair(counter, { ...report, stranded: 4, orphanJobs: 0 });
    countRepair(counter, { ...report, stranded: 1, orphanJobs: 2 });
    countRepair(counter, { ...report, stranded: 0, orphanJobs: 0 });
    text = await registry.metrics();
    expect(text).toContain('lt_repair_found_total{kind="stranded"} 5');
    expect(text).toContain('lt_repair_found_total{kind="orphan-job"} 2');
  });
});
