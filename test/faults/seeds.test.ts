// Seeded fault schedules in the suite: four fixed seeds, each a run of worker processes under
// SIGKILL, SIGTERM and SIGSTOP, a Redis of its own paused, frozen, crashed, filled and cut off, a failing,
// slow and absent service and an organization paused, then drained and judged (judge.ts). A failing seed
// prints its run, its schedule and `npm run faults -- --seeds N`, which replays it; the runner takes many
// more (`npm run faults -- --seeds 1-200`). Each seed must also show that its faults hit something.
// Two of the four fixed seeds run here, the other two in seeds-more.test.ts (fixed-seeds.ts).
import { describe, expect, it } from 'vitest';
import { drawRun } from './draw-run.ts';
import { drawSchedule, type FaultKind } from './draw-schedule.ts';
import { CI_SEEDS, fixedSeedTests } from './fixed-seeds.ts';
import { parseSeeds } from './seed-list.ts';

const MUST_COVER: readonly FaultKind[] = [
  'worker-kill',
  'worker-term',
  'worker-stop',
  'redis-crash',
  'redis-full',
  'redis-freeze',
  'redis-kill-clients',
  'service-slow',
  'org-pause',
];

describe('the seeded fault harness', () => {
  it('draws the same run and schedule from the same seed, and another from another', () => {
    for (const seed of [1, 7, 1234]) {
      expect(drawRun(seed)).toEqual(drawRun(seed));
      expect(drawSchedule(drawRun(seed))).toEqual(drawSchedule(drawRun(seed)));
    }
    expect(drawSchedule(drawRun(1))).not.toEqual(drawSchedule(drawRun(2)));
  });

  it('reads --seeds as a range, one seed or a list', () => {
    expect(parseSeeds('1-4')).toEqual([1, 2, 3, 4]);
    expect(parseSeeds('7')).toEqual([7]);
    expect(parseSeeds('3,9,12')).toEqual([3, 9, 12]);
    expect(() => parseSeeds('4-1')).toThrow(/must go up/);
    expect(() => parseSeeds('x')).toThrow(/expected N/);
  });

  it('the fixed seeds cover the faults that matter most between them', () => {
    const kinds = new Set(CI_SEEDS.flatMap((s) => drawSchedule(drawRun(s)).map((e) => e.kind)));
    for (const kind of MUST_COVER) expect([...kinds], kind).toContain(kind);
  });
});

describe('fixed seeds: every invariant holds, and every fault had something at stake', () => {
  fixedSeedTests(CI_SEEDS.slice(0, 2));
});
