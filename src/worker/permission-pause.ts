// A Redis permission error (NOPERM: an ACL rule revoked while `work` runs) must not make a worker spin.
// To BullMQ it is not a connection error, so its loop does not wait before the next fetch (its
// runRetryDelay only applies to a lost connection): the fetch is sent again at once, thousands of refused
// commands a second, and when the refusal is already in a rejected promise (a connection whose start
// was refused) the loop never even yields to the event loop, so SIGINT and SIGTERM go unheard. A
// worker that meets one pauses itself (pause() stops its loop at once), says which rule is missing, and
// tries again after PERMISSION_RETRY_MS: one refused fetch per worker per interval, and a fixed ACL is
// picked up without a restart.
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
