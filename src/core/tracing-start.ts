// Starts tracing when the configuration turns it on: one SDK per process however many contexts
// it opens (the first start loads it, the last stop shuts it down).
import type { SpanExporter } from '@opentelemetry/sdk-trace-node';
import type { TracingSettings } from './tracing-config.ts';

export interface Tracing {
  /** Whether this process exports spans. */
  readonly on: boolean;
  stop(): Promise<void>;
}

const OFF: Tracing = { on: false, stop: async () => {} };

let shared: { started: Promise<{ shutdown(): Promise<void> }>; users: number } | undefined;

/** Tracing as configured; `exporter` (a test's) turns it on and replaces the configured ones. */
export async function startTracing(
  settings: TracingSettings | undefined,
  exporter?: SpanExporter,
): Promise<Tracing> {
  if (!settings && !exporter) return OFF;
  if (!shared) {
    const chosen = settings ?? { exporters: [], serviceName: 'learner-transfer' };
    shared = {
      started: import('./tracing-sdk.ts').then(({ startSdk }) => startSdk(chosen, exporter)),
      users: 0,
    };
  }
  const mine = shared;
  mine.users++;
  await mine.started;
  let stopped = false;
  return {
    on: true,
    async stop() {
      if (stopped) return;
      stopped = true;
      if (--mine.users > 0) return;
      if (shared === mine) shared = undefined;
      await (await mine.started).shutdown();
    },
  };
}
