// Seeded fault injection: latency around counting, 500s, socket resets before or after the
// effect, and cut 200 bodies. One roll per counted transfer picks at most one fault.
import { stream, between, type Random } from './random.ts';
import { LearnerTransferError } from '../core/errors.ts';
import type { FaultKind, SimFaults } from './types.ts';

function checkRange(name: string, range: [number, number] | undefined): void {
  if (range === undefined) return;
  const [min, max] = range;
  if (!Number.isFinite(min) || !Number.isFinite(max) || min < 0 || max < min) {
    throw new LearnerTransferError(
      'LT_SIMULATOR_OPTIONS',
      `simulator faults.${name}: expected [min, max] with 0 <= min <= max, got [${min}, ${max}]`,
    );
  }
}

function checkRate(name: string, rate: number | undefined): void {
  if (rate === undefined) return;
  if (!Number.isFinite(rate) || rate < 0 || rate > 1) {
    throw new LearnerTransferError(
      'LT_SIMULATOR_OPTIONS',
      `simulator faults.${name}: expected a share from 0 to 1, got ${rate}`,
    );
  }
}

/** Throws an Error naming the field when a fault setting is out of range. */
export function validateFaults(f: SimFaults): void {
  checkRange('latencyBeforeMs', f.latencyBeforeMs);
  checkRange('latencyAfterMs', f.latencyAfterMs);
  checkRate('errorRate', f.errorRate);
  checkRate('resetRate', f.resetRate);
  checkRate('truncateRate', f.truncateRate);
  const sum = (f.errorRate ?? 0) + (f.resetRate ?? 0) + (f.truncateRate ?? 0);
  if (sum > 1 + 1e-9) {
    throw new LearnerTransferError(
      'LT_SIMULATOR_OPTIONS',
      `simulator faults: errorRate + resetRate + truncateRate must not exceed 1, got ${sum}`,
    );
  }
}

export class FaultInjector {
  private faults: SimFaults = {};
  private readonly choice: Random;
  private readonly latency: Random;

  constructor(seed: number, faults: SimFaults = {}) {
    this.choice = stream(seed, 'faults');
    this.latency = stream(seed, 'latency');
    this.set(faults);
  }

  set(faults: SimFaults): void {
    validateFaults(faults);
    this.faults = { ...faults };
  }

  get down(): boolean {
    return this.faults.down === true;
  }

  latencyBefore(): number {
    return between(this.latency, this.faults.latencyBeforeMs);
  }

  latencyAfter(): number {
    return between(this.latency, this.faults.latencyAfterMs);
  }

  /** The fault for one counted transfer, or undefined for a normal answer. */
  pick(): FaultKind | undefined {
    const { errorRate = 0, resetRate = 0, truncateRate = 0 } = this.faults;
    if (errorRate + resetRate + truncateRate === 0) return undefined;
    const u = this.choice.next();
    if (u < errorRate) return 'error';
    if (u < errorRate + resetRate) return this.choice.chance(0.5) ? 'reset-after' : 'reset-before';
    if (u < errorRate + resetRate + truncateRate) return 'truncate';
    return undefined;
  }
}
