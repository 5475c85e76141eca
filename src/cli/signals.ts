// What only a real process has: SIGINT/SIGTERM for a graceful stop with a bound, SIGHUP to read
// files again, an exit no open handle holds back. main.ts wires them into run(); a command run in
// process (a test, a program) gets none, so nothing there calls process.exit.
import { EXIT } from '../core/errors.ts';
import type { ProcessHooks } from './io.ts';

/**
 * Runs `stop` on the first SIGINT/SIGTERM; a second signal, or `forceAfterMs` passing, exits at once.
 * Returns a function that removes the handlers.
 */
export function onProcessShutdown(
  stop: (signal: string) => Promise<void> | void,
  forceAfterMs = 30_000,
): () => void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      process.stderr.write(`learner-transfer: second ${signal}, exiting now\n`);
      process.exit(EXIT.interrupted);
    }
    stopping = true;
    process.stderr.write(`learner-transfer: ${signal} received, shutting down (again to force)\n`);
    const timer = setTimeout(() => {
      process.stderr.write(`learner-transfer: shutdown took over ${forceAfterMs} ms, exiting\n`);
      process.exit(EXIT.interrupted);
    }, forceAfterMs);
    timer.unref();
    // A stop that fails (Redis gone while closing) is reported and ends the process, not left as an
    // unhandled rejection.
    void Promise.resolve()
      .then(() => stop(signal))
      .catch((err: unknown) => {
        process.stderr.write(
          `learner-transfer: error while shutting down: ${(err as Error)?.message ?? String(err)}\n`,
        );
        process.exit(EXIT.interrupted);
      })
      .finally(() => clearTimeout(timer));
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return () => {
    process.off('SIGINT', handler);
    process.off('SIGTERM', handler);
  };
}

/**
 * Runs `handler` on each SIGHUP. Only a command that reads files again on it listens: without a
 * listener, SIGHUP ends the process as it always did (a closed terminal stops what it started).
 */
function onProcessHangup(handler: () => void): () => void {
  const listener = () => handler();
  process.on('SIGHUP', listener);
  return () => process.off('SIGHUP', listener);
}

/** The hooks of this process, for run(). */
export const processHooks: ProcessHooks = {
  onShutdown: onProcessShutdown,
  onHangup: onProcessHangup,
  exitAfter(ms, code) {
    setTimeout(() => process.exit(code), ms).unref();
  },
};
