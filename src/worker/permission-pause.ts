// A Redis permission error (NOPERM, an ACL rule revoked while `work` runs) pauses the worker and retries
// after PERMISSION_RETRY_MS: BullMQ would re-fetch at once, in a loop that can starve SIGINT/SIGTERM.
import type { Worker } from 'bullmq';
import { permissionDenial, type PermissionDenial } from '../redis/permission-denial.ts';

/** How long a worker refused by Redis's ACL waits before it fetches again. */
export const PERMISSION_RETRY_MS = 5_000;

export interface PermissionPauseOptions {
  retryMs?: number;
  /** Each refusal the worker reports (to be logged, throttled). */
  onDenied(err: Error, denial: PermissionDenial): void;
  /** Whether the worker may run again now (false while something else holds it, such as the write gate). */
  mayResume?: () => boolean;
}

/** Pauses `worker` for a while on each permission error it reports; stop() before closing it. */
export function pauseOnPermissionError(worker: Worker, options: PermissionPauseOptions): { stop(): void } {
  const retryMs = options.retryMs ?? PERMISSION_RETRY_MS;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  worker.on('error', (err: Error) => {
    const denial = permissionDenial(err);
    if (!denial || stopped) return;
    options.onDenied(err, denial);
    if (timer) return;
    void worker.pause(true).catch(() => {});
    timer = setTimeout(() => {
      timer = undefined;
      if (!stopped && (options.mayResume?.() ?? true)) void worker.resume().catch(() => {});
    }, retryMs);
  });
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
