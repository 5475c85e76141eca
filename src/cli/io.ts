// What one run of a command is given by whoever runs it: the environment and the two streams, and
// the hooks only a real process can honour (signals, a forced exit). A command reads and writes
// nothing else, so a test can run it in its own process and a program can embed it. The command
// table holds a Cli from the start: the configuration (zod) and the context (Redis, BullMQ) load
// when a command asks.
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
  /** Where a question is answered (the real process's stdin); absent: nobody to ask, as in a script. */
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
  /** The live line of the run (work's progress at a terminal); other lines are written around it. */
  readonly live = new LiveLine();
  /**
   * The reader of stdout went away (`report | head -1`): nothing more is written, and the command ends
   * quietly with exit status 0, as a command of a pipeline does when its reader has what it wanted.
   */
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

  /** The run is over: its listeners leave the streams (a program may run many commands on its own). */
  dispose(): void {
    this.live.end();
    this.stdout.off('error', this.#onStdoutError);
    this.stderr.off('error', this.#onStderrError);
  }

  /**
   * A stream's error. A closed pipe (EPIPE) on stdout ends the run quietly: no more writes, exit 0 (in a
   * real process at once: there is nothing left to say to anyone). On stderr it is only noted: there is
   * no one to tell. Any other error of a stream is as silent: what writes checks its own writes.
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
   * Where the logger's lines go: this run's stderr, around the live line. The real process keeps pino's
   * own asynchronous destination on fd 2 when it is not a terminal (a busy worker logs a lot to a file or
   * a service, and must not wait on each line); a terminal is read by a person, at a person's pace.
   */
  get logDestination(): DestinationStream | undefined {
    if (this.stderr === process.stderr && !this.stderr.isTTY) return undefined;
    return { write: (line: string) => this.live.around(() => void this.stderr.write(line)) };
  }

  /** The light context of the commands that need Redis alone (app/read-context.ts): no BullMQ, no undici. */
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
