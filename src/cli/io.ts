// What one run of a command is given: the environment, the two streams, and the hooks only a real
// process honours (signals, a forced exit). A command touches nothing else, so a test can run it
// in process and a program can embed it; config and context load when a command asks.
import type { Readable, Writable } from 'node:stream';
import type { DestinationStream } from 'pino';
import type { AppContext } from '../app/context.ts';
import type { ReadContext } from '../app/read-context.ts';
import type { Config, LoadOptions } from '../core/config.ts';
import { resolveLogFormat, type LogFormat, type TextLogOptions } from '../core/log-text.ts';
import { LiveLine } from './live-line.ts';

export type Env = Record<string, string | undefined>;

/** A stream a command writes to; `isTTY` as a terminal's stream has it. */
export type Output = Writable & { isTTY?: boolean };

/**
 * Runs `stop` on the first request to shut down; returns what removes the handler.
 * `forceAfterMs` bounds the stop where a process can be ended.
 */
export type ShutdownHook = (
  stop: (signal: string) => Promise<void> | void,
  forceAfterMs: number,
) => () => void;

/** What only a real process can do; in process, signals never come and nothing is exited. */
export interface ProcessHooks {
  onShutdown: ShutdownHook;
  /** Runs `handler` on each SIGHUP; returns what removes it. */
  onHangup(handler: () => void): () => void;
  /** Ends the process after `ms`, so that a library's open handle cannot keep it alive. */
  exitAfter(ms: number, code?: number): void;
}

export interface CliIo {
  env: Env;
  stdout: Output;
  stderr: Output;
  /** Where a question is answered (stdin); absent: nobody to ask, as in a script. */
  stdin?: (Readable & { isTTY?: boolean }) | undefined;
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
  readonly stdin: (Readable & { isTTY?: boolean }) | undefined;
  readonly hooks: ProcessHooks;
  /** The exit status a command chose; undefined is 0. */
  exitCode: number | undefined;
  /** The live line (work's progress at a terminal); other lines are written around it. */
  readonly live = new LiveLine();
  /** Stdout's reader went away (`report | head -1`): no more writes, and a quiet exit 0. */
  outputClosed = false;

  constructor(io: CliIo) {
    this.env = io.env;
    this.stdout = io.stdout;
    this.stderr = io.stderr;
    this.stdin = io.stdin;
    this.hooks = io.process ?? IN_PROCESS;
    this.stdout.on('error', this.#onStdoutError);
    this.stderr.on('error', this.#onStderrError);
  }

  readonly #onStdoutError = (err: NodeJS.ErrnoException) => this.#closed(err, true);
  readonly #onStderrError = (err: NodeJS.ErrnoException) => this.#closed(err, false);

  /** The run is over: its listeners leave the streams (a program may run many commands). */
  dispose(): void {
    this.live.end();
    this.stdout.off('error', this.#onStdoutError);
    this.stderr.off('error', this.#onStderrError);
  }

  /**
   * A stream's error. EPIPE on stdout ends the run quietly (exit 0, at once in a real process); on
   * stderr it is only noted. Other stream errors are silent too: writers check their own writes.
   */
  #closed(err: NodeJS.ErrnoException, stdout: boolean): void {
    if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_DESTROYED') return;
    if (stdout && !this.outputClosed) {
      this.outputClosed = true;
      this.hooks.exitAfter(0, 0);
    }
  }

  /** A line on stdout (what console.log printed); nothing once stdout's reader is gone. */
  print(text: string): void {
    if (this.outputClosed) return;
    this.live.around(() => void this.stdout.write(`${text}\n`));
  }

  /** A line on stderr (what console.error printed). */
  warn(text: string): void {
    this.live.around(() => void this.stderr.write(`${text}\n`));
  }

  /** LOG_FORMAT of this run: auto is text when its stderr is a terminal. */
  logFormat(config: Readonly<Config>): LogFormat {
    return resolveLogFormat(config.logFormat, this.stderr);
  }

  async config(options: LoadOptions = {}): Promise<Readonly<Config>> {
    const { loadConfig } = await import('../core/config.ts');
    return loadConfig(this.env, options);
  }

  /**
   * Where the logger's lines go: this run's stderr, around the live line. Off a terminal the real
   * process keeps pino's asynchronous fd 2, so a busy worker never waits on a line.
   */
  get logDestination(): DestinationStream | undefined {
    if (this.stderr === process.stderr && !this.stderr.isTTY) return undefined;
    return { write: (line: string) => this.live.around(() => void this.stderr.write(line)) };
  }

  /** The light context of the commands that need Redis alone (app/read-context.ts). */
  async readContext(config: Readonly<Config>): Promise<ReadContext> {
    const { createReadContext } = await import('../app/read-context.ts');
    return createReadContext(config, {
      logDestination: this.logDestination,
      logFormat: this.logFormat(config),
    });
  }

  async context(
    config: Readonly<Config>,
    options: { redisTimeoutMs?: number; connectionName?: string; logText?: TextLogOptions } = {},
  ): Promise<AppContext> {
    const { createContext } = await import('../app/context.ts');
    const { logText, ...rest } = options;
    return createContext(config, {
      ...rest,
      logDestination: this.logDestination,
      logFormat: this.logFormat(config),
      ...(logText ? { logText } : {}),
    });
  }

  onShutdown(stop: (signal: string) => Promise<void> | void, forceAfterMs = 30_000): () => void {
    return this.hooks.onShutdown(stop, forceAfterMs);
  }

  onHangup(handler: () => void): () => void {
    return this.hooks.onHangup(handler);
  }
}
