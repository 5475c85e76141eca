// `learner-transfer simulate`: the Learner API simulator in the foreground, for the demo and for
// trying the worker by hand. Prints the URL and its tokens (fixtures, not secrets).
import { formatRate, type Rate } from '../core/duration.ts';
import { LearnerTransferError } from '../core/errors.ts';
import {
  createSimulator,
  DEFAULT_TOKENS,
  type RepeatMode,
  type SimFaults,
  type Simulator,
  type SimulatorOptions,
} from '../simulator/index.ts';
import type { Cli } from './io.ts';

export interface SimulateFlags {
  port: number;
  host: string;
  learners?: number;
  seed?: number;
  repeatMode?: RepeatMode;
  limitPerToken?: Rate;
  limitPerOrg?: Rate;
  window: 'rolling' | 'fixed';
  latency?: [number, number];
  errorRate?: number;
  resetRate?: number;
  truncateRate?: number;
}

/**
 * Flags to simulator options. The latency range is the service's whole round trip, half before
 * the request is counted and half after, so the client cannot know when it was counted.
 */
export function simulatorOptions(flags: SimulateFlags): SimulatorOptions {
  const rates = (flags.errorRate ?? 0) + (flags.resetRate ?? 0) + (flags.truncateRate ?? 0);
  if (rates > 1) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `--error-rate + --reset-rate + --truncate-rate must not exceed 1, got ${rates}`,
    );
  }
  const faults: SimFaults = {};
  if (flags.latency) {
    const [min, max] = flags.latency;
    faults.latencyBeforeMs = [min / 2, max / 2];
    faults.latencyAfterMs = [min / 2, max / 2];
  }
  if (flags.errorRate !== undefined) faults.errorRate = flags.errorRate;
  if (flags.resetRate !== undefined) faults.resetRate = flags.resetRate;
  if (flags.truncateRate !== undefined) faults.truncateRate = flags.truncateRate;
  const options: SimulatorOptions = { faults };
  if (flags.learners !== undefined) options.learners = flags.learners;
  if (flags.seed !== undefined) options.seed = flags.seed;
  if (flags.repeatMode !== undefined) options.repeatMode = flags.repeatMode;
  if (flags.limitPerToken || flags.limitPerOrg) {
    options.limits = { window: flags.window };
    if (flags.limitPerToken) options.limits.perToken = flags.limitPerToken;
    if (flags.limitPerOrg) options.limits.perOrg = flags.limitPerOrg;
  }
  return options;
}

/** Starts the simulator and prints how to point the worker at it. Returns it running. */
export async function startSimulator(
  flags: SimulateFlags,
  print: (line: string) => void,
): Promise<Simulator> {
  const options = simulatorOptions(flags);
  const sim = createSimulator(options);
  try {
    await sim.listen(flags.port, flags.host);
  } catch (err) {
    await sim.close().catch(() => undefined);
    const code = (err as { code?: string }).code;
    if (code === 'EADDRINUSE' || code === 'EADDRNOTAVAIL' || code === 'EACCES') {
      throw new LearnerTransferError(
        'LT_USAGE',
        `--port/--host: cannot listen on ${flags.host}:${flags.port} (${code})`,
        {
          cause: err,
        },
      );
    }
    throw err;
  }
  const limits = options.limits;
  const writable = DEFAULT_TOKENS.filter((t) => t.canTransfer !== false);
  const readOnly = DEFAULT_TOKENS.filter((t) => t.canTransfer === false);
  print(`Learner API simulator listening on ${sim.url}`);
  print(
    `  learners: ${options.learners ?? 1000}, seed ${options.seed ?? 1}, repeat mode ${options.repeatMode ?? 'error'}`,
  );
  print(
    `  limits: ${
      limits
        ? [
            limits.perToken && `${formatRate(limits.perToken)} per token`,
            limits.perOrg && `${formatRate(limits.perOrg)} per organization`,
          ]
            .filter(Boolean)
            .join(', ') + ` (${limits.window} window)`
        : 'none enforced'
    }`,
  );
  print('Simulator tokens (fixtures, not secrets):');
  print(`  LEARNER_API_BASE_URL=${sim.url}`);
  print(`  LEARNER_API_TOKENS=${writable.map((t) => `${t.org}:${t.token}`).join(',')}`);
  for (const t of readOnly)
    print(`  (${t.org}:${t.token} has no transfer permission: its transfers answer 403)`);
  return sim;
}

export async function simulateCommand(cli: Cli, flags: SimulateFlags): Promise<void> {
  const sim = await startSimulator(flags, (line) => cli.print(line));
  cli.onShutdown(async () => {
    await sim.close();
    cli.print('Simulator stopped.');
  }, 5_000);
}
