// The worker processes of a seeded run: N slots, each running `learner-transfer work` with a spool
// directory of its own, so a slot started again after a SIGKILL replays what its previous process left.
// The slots act as a supervisor would: a process that exits without the harness asking (a lost Redis
// exits 4 on purpose) is noted and started again. Every process and its output is kept, for the token
// scan and so that none outlives the seed.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnCli, waitExit, type CliResult } from '../helpers/cli.ts';

type Child = ReturnType<typeof spawnCli>;

const alive = (c: Child): boolean => c.exitCode === null && c.signalCode === null;

export class WorkerSlots {
  /** Sentences about exits nobody asked for, for the seed's report. */
  readonly notes: string[] = [];
  /** Each slot's supervised process. */
  readonly #children: (Child | undefined)[];
  /** Every process ever started (supervised or not), for the outputs and the final kill. */
  readonly #all: Child[] = [];
  readonly #asked = new WeakMap<Child, NodeJS.Signals>();
  #supervising = true;
  #closed = false;

  constructor(
    private readonly env: Record<string, string>,
    private readonly spoolRoot: string,
    readonly count: number,
    private readonly concurrency: number,
  ) {
    this.#children = Array.from({ length: count }, () => undefined);
  }

  spoolDir(slot: number): string {
    return join(this.spoolRoot, `spool-${slot + 1}`);
  }

  #spawn(slot: number, untilIdle: boolean): Child {
    // A timed-out seed's schedule may still be asleep in a restart: it must not start anything afterwards.
    if (this.#closed) throw new Error(`worker ${slot + 1} not started: the seed is over`);
    const args = ['work', '--concurrency', String(this.concurrency), ...(untilIdle ? ['--until-idle'] : [])];
    const child = spawnCli(args, { ...this.env, SPOOL_DIR: this.spoolDir(slot) });
    this.#all.push(child);
    return child;
  }

  /** Starts the slot's supervised process: plain `work`, which runs until SIGTERM. */
  start(slot: number): Child {
    const child = this.#spawn(slot, false);
    this.#children[slot] = child;
    child.once('exit', (code, signal) => {
      // Let the pipes drain, as waitExit does.
      setImmediate(() => this.#exited(slot, child, { code, signal, ...child.output }));
    });
    return child;
  }

  /** `work --until-idle` on the slot's spool directory, beside its process (not supervised). */
  untilIdle(slot: number, boundMs: number): Promise<CliResult> {
    return waitExit(this.#spawn(slot, true), boundMs);
  }

  #exited(slot: number, child: Child, result: CliResult): void {
    if (this.#children[slot] === child) this.#children[slot] = undefined;
    if (this.#asked.has(child) || !this.#supervising) return;
    const last = result.stderr.trim().split('\n').slice(-1)[0] ?? '';
    this.notes.push(
      `worker ${slot + 1} exited on its own (code ${result.code}, signal ${result.signal}): ${last.slice(0, 300)}`,
    );
    // As a supervisor would: start it again after a moment.
    void sleep(500).then(() => {
      if (this.#supervising && !this.#closed && !this.#children[slot]) this.start(slot);
    });
  }

  running(slot: number): Child | undefined {
    return this.#children[slot];
  }

  /** Sends a signal; for SIGKILL and SIGTERM waits for the exit (SIGKILL after `boundMs`). */
  async signal(slot: number, signal: NodeJS.Signals, boundMs = 30_000): Promise<CliResult | undefined> {
    const child = this.#children[slot];
    if (!child || !alive(child)) return undefined;
    if (signal !== 'SIGKILL' && signal !== 'SIGTERM') {
      child.kill(signal);
      return undefined;
    }
    this.#asked.set(child, signal);
    const exit = waitExit(child, boundMs);
    child.kill(signal);
    return exit;
  }

  /** Stops supervising and ends every slot's process gracefully (SIGTERM, SIGKILL after `boundMs`). */
  async stopAll(boundMs: number): Promise<void> {
    this.#supervising = false;
    await Promise.all(
      this.#children.map((_, slot) => this.signal(slot, 'SIGTERM', boundMs).catch(() => undefined)),
    );
  }

  /** Kills whatever still runs (a frozen process too), for the end of a seed whatever happened. */
  killAll(): void {
    this.#supervising = false;
    this.#closed = true;
    for (const child of this.#all.filter(alive)) {
      this.#asked.set(child, 'SIGKILL');
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  }

  /** Every output of every process so far (what running ones have said too). */
  outputs(): string[] {
    return this.#all.flatMap((c) => [c.output.stdout, c.output.stderr]);
  }
}
