// What `work` shows a person at a terminal instead of a line per learner: one live line, as the
// demo's (done, failed, waiting, budget left, next permit); without a terminal, the same line now
// and then.
import type { AppContext } from '../app/context.ts';
import { humanizeMs } from '../core/duration.ts';
import type { BudgetView } from '../limiter/index.ts';
import { isSuccessBucket, type Bucket } from '../outcomes/record.ts';
import { laneJobs } from '../queue/lane-state.ts';
import type { Cli, Output } from './io.ts';

/** Where the line goes: drawn in place on a terminal, or written as a plain line now and then. */
export type ProgressTarget = { kind: 'live'; stream: Output } | { kind: 'plain' };

/**
 * Whether `work` shows the progress line, and where: live on stdout if a terminal (else stderr if
 * one); plain lines when the logs are text and no terminal is there; none when the logs are JSON.
 */
export function progressTarget(cli: Cli, logFormat: 'json' | 'text'): ProgressTarget | undefined {
  if (cli.stdout.isTTY) return { kind: 'live', stream: cli.stdout };
  if (logFormat !== 'text') return undefined;
  if (cli.stderr.isTTY) return { kind: 'live', stream: cli.stderr };
  return { kind: 'plain' };
}

/** The budget an organization can spend now, and when it can spend again when it cannot. */
function usable(view: BudgetView): { left: number; nextInMs: number } {
  const tokensLeft = view.tokens.reduce((a, t) => a + (t.blocked || t.paused ? 0 : t.remaining), 0);
  const left = view.org.paused || view.org.blocked ? 0 : Math.min(view.org.remaining, tokensLeft);
  const tokenNext = Math.min(...view.tokens.map((t) => t.nextFreeInMs), Infinity);
  // Spent: the window's room comes back; paced: the bucket's next drop.
  const paced = Math.max(
    view.org.pace?.nextInMs ?? 0,
    Math.min(...view.tokens.map((t) => t.pace?.nextInMs ?? 0), Infinity),
  );
  const nextInMs = left === 0 ? Math.max(view.org.nextFreeInMs, tokenNext) : paced;
  return { left, nextInMs: Number.isFinite(nextInMs) ? nextInMs : 0 };
}

/** "in 4 s", "in 250 ms", "now". */
function inTime(ms: number): string {
  if (ms <= 0) return 'now';
  return ms < 1000 ? `in ${Math.max(1, Math.round(ms))} ms` : `in ${humanizeMs(ms)}`;
}

export class WorkProgress {
  readonly #cli: Cli;
  readonly #ctx: AppContext;
  readonly #orgs: () => readonly string[];
  readonly #target: ProgressTarget;
  #done = 0;
  #failed = 0;
  #timer: NodeJS.Timeout | undefined;
  #reading = false;
  #last = '';

  constructor(cli: Cli, ctx: AppContext, orgs: () => readonly string[], target: ProgressTarget) {
    this.#cli = cli;
    this.#ctx = ctx;
    this.#orgs = orgs;
    this.#target = target;
  }

  /** A final outcome this process recorded (work's onOutcome). */
  count(e: { final: boolean; bucket: Bucket }): void {
    if (!e.final) return;
    if (isSuccessBucket(e.bucket)) this.#done++;
    else this.#failed++;
  }

  start(): void {
    if (this.#target.kind === 'live') this.#cli.live.attach(this.#target.stream);
    // A fleet's budgets are read in one pipeline, but not a thousand of them every second.
    const everyMs = this.#target.kind === 'live' ? Math.max(1000, this.#orgs().length * 5) : 30_000;
    this.#timer = setInterval(() => void this.#tick(), everyMs);
    this.#timer.unref();
    void this.#tick();
  }

  /** Stops; the last line stays on the terminal, above what work says when it stops. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#cli.live.end(true);
  }

  async #tick(): Promise<void> {
    if (this.#reading || !this.#timer) return;
    this.#reading = true;
    try {
      const text = await this.#line();
      if (!this.#timer) return;
      if (this.#target.kind === 'live') this.#cli.live.show(text);
      else if (text !== this.#last) this.#cli.warn(text);
      this.#last = text;
    } catch {
      // Redis is away for a moment: the line stays as it was, and the logs say why.
    } finally {
      this.#reading = false;
    }
  }

  /** "work: 12 done, 1 failed, 340 waiting, 8 in flight | budget 88 left | next permit in 4 s". */
  async #line(): Promise<string> {
    const ctx = this.#ctx;
    const orgs = [...this.#orgs()];
    const jobs = await laneJobs(ctx.redis, ctx.keys, orgs);
    const views = await ctx.budget.peekMany(
      orgs.map((org) => ({ org, tokenIds: ctx.tokens.tokensOf(org).map((t) => t.id) })),
    );
    let waiting = 0;
    let active = 0;
    let left = 0;
    let next = Infinity;
    orgs.forEach((_, i) => {
      const j = jobs[i];
      const view = views[i];
      if (!j || !view) return;
      waiting += j.ready + j.delayed;
      active += j.active;
      const u = usable(view);
      left += u.left;
      if (j.ready > 0 && u.nextInMs > 0) next = Math.min(next, u.nextInMs);
    });
    const permit = waiting === 0 ? '' : ` | next permit ${inTime(Number.isFinite(next) ? next : 0)}`;
    return (
      `work: ${this.#done} done, ${this.#failed} failed, ${waiting} waiting, ${active} in flight` +
      ` | budget ${left} left${orgs.length > 1 ? ` in ${orgs.length} organizations` : ''}${permit}`
    );
  }
}
