// What one run of a command is given by whoever runs it: the environment and the two streams, and the
// hooks only a real process can honour (signals, a forced exit). A command reads and writes nothing
// else, so a test can run it in its own process and a program can embed it.
import type { Writable } from 'node:stream';
import type { DestinationStream } from 'pino';
import { createContext, type AppContext } from '../app/context.ts';
import { loadConfig, type Config, type LoadOptions } from '../core/config.ts';

export type Env = Record<string, string | undefined>;

/** A stream a command writes to; `isTTY` as a terminal's stream has it. */
export type Output = Writable & { isTTY?: boolean };

/**
 * Runs `stop` on the first request to shut down (SIGINT/SIGTERM in a real process); returns a function
 * that removes the handler. `forceAfterMs` bounds the stop where a process can be ended.
 */
export type ShutdownHook = (
  stop: (signal: string) => Promise<void> | void,
  forceAfterMs: number,
) => () => void;

/** What only a real process can do; in process, signals never come and nothing is exited. */
export interface ProcessHooks {
  onShutdown: ShutdownHook;
  /** Runs `handler` on each SIGHUP (read the configuration files again); returns a function that removes it. */
  onHangup(handler: () => void): () => void;
  /** Ends the process after `ms` (with `code`, else the exit code set): a library's open handle must not keep it alive. */
  exitAfter(ms: number, code?: number): void;
}

export interface CliIo {
  env: Env;
  stdout: Output;
  stderr: Output;
  /** The real process's hooks (src/cli/signals.ts); absent in process. */
  process?: ProcessHooks | undefined;
}

const IN_PROCESS: ProcessHooks = {
  onShutdown: () => () => undefined,
  onHangup: () => () => undefined,
  exitAfter: () => undefined,
};

/** One run of the CLI: its io, and the exit status a command sets. */
export class Cli {
  readonly env: Env;
  readonly stdout: Output;
  readonly stderr: Output;
  readonly hooks: ProcessHooks;
  /** The exit status a command chose; undefined is 0. */
  exitCode: number | undefined;

  constructor(io: CliIo) {
    this.env = io.env;
    this.stdout = io.stdout;
    this.stderr = io.stderr;
    this.hooks = io.process ?? IN_PROCESS;
  }

  /** A line on stdout (what console.log printed). */
  print(text: string): void {
    this.stdout.write(`${text}\n`);
  }

  /** A line on stderr (what console.error printed). */
  warn(text: string): void {
    this.stderr.write(`${text}\n`);
  }

  config(options: LoadOptions = {}): Readonly<Config> {
    return loadConfig(this.env, options);
  }

  /**
   * Where the logger's lines go: this run's stderr. The real process keeps pino's own asynchronous
   * destination on fd 2 (a busy worker logs a lot, and must not wait on each line).
   */
  get logDestination(): DestinationStream | undefined {
    if (this.stderr === process.stderr) return undefined;
    return { write: (line: string) => void this.stderr.write(line) };
  }

  context(
    config: Readonly<Config>,
    options: { redisTimeoutMs?: number; connectionName?: string } = {},
  ): Promise<AppContext> {
    return createContext(config, { ...options, logDestination: this.logDestination });
  }

  onShutdown(stop: (signal: string) => Promise<void> | void, forceAfterMs = 30_000): () => void {
    return this.hooks.onShutdown(stop, forceAfterMs);
  }

  onHangup(handler: () => void): () => void {
    return this.hooks.onHangup(handler);
  }
}
