// A repeated error is logged as one: while Redis is down, every worker and connection reports
// it many times a second; the log shows it once, then how often it came back.
import type { Logger } from './log.ts';

export type ThrottledLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

export interface LogThrottleOptions {
  /** A repeated line is summed up once per interval (default 10 s). */
  intervalMs?: number;
}

interface Entry {
  level: ThrottledLevel;
  msg: string;
  /** Fields of the first occurrence; those a repeat changed are left out of the summary. */
  fields: Record<string, unknown>;
  varied: Set<string>;
  repeats: number;
  windowStart: number;
  timer: NodeJS.Timeout;
}

/** Digits vary between copies of one error (ports, ids, counts): they do not make it another. */
export function stripNumbers(text: string): string {
  return text.replace(/\d+/g, '#');
}

/** The default key: the message and the `err` text with numbers stripped. */
export function throttleKey(msg: string, fields: Record<string, unknown>): string {
  const err = fields.err;
  const text = typeof err === 'string' ? err : err instanceof Error ? err.message : '';
  return `${msg}\u0000${stripNumbers(text)}`;
}

function elapsedText(ms: number): string {
  return ms >= 1000 ? `${Number((ms / 1000).toFixed(1))} s` : `${Math.round(ms)} ms`;
}

/**
 * Logs the first occurrence of a key at once, then one line per interval with its repeats; a
 * key quiet for a whole interval is forgotten. flush() and stop() sum up.
 */
export class LogThrottle {
  readonly #logger: Logger;
  readonly #intervalMs: number;
  readonly #entries = new Map<string, Entry>();

  constructor(logger: Logger, options: LogThrottleOptions = {}) {
    this.#logger = logger;
    this.#intervalMs = options.intervalMs ?? 10_000;
  }

  log(level: ThrottledLevel, fields: Record<string, unknown>, msg: string, key?: string): void {
    const k = key ?? throttleKey(msg, fields);
    const entry = this.#entries.get(k);
    if (entry) {
      entry.repeats++;
      for (const [name, value] of Object.entries(fields)) {
        if (!entry.varied.has(name) && entry.fields[name] !== value) entry.varied.add(name);
      }
      return;
    }
    this.#logger[level](fields, msg);
    this.#entries.set(k, {
      level,
      msg,
      fields,
      varied: new Set(),
      repeats: 0,
      windowStart: Date.now(),
      timer: this.#timer(k),
    });
  }

  warn(fields: Record<string, unknown>, msg: string, key?: string): void {
    this.log('warn', fields, msg, key);
  }

  error(fields: Record<string, unknown>, msg: string, key?: string): void {
    this.log('error', fields, msg, key);
  }

  /** Sums up every key's repeats so far (one line each), and starts their windows again. */
  flush(): void {
    for (const entry of this.#entries.values()) this.#summarize(entry);
  }

  /** flush(), then forgets every key and stops its timers. */
  stop(): void {
    this.flush();
    for (const entry of this.#entries.values()) clearTimeout(entry.timer);
    this.#entries.clear();
  }

  #timer(key: string): NodeJS.Timeout {
    const timer = setTimeout(() => this.#tick(key), this.#intervalMs);
    // A throttle must never keep a process alive that has nothing else to do.
    timer.unref();
    return timer;
  }

  #tick(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    if (entry.repeats === 0) {
      this.#entries.delete(key);
      return;
    }
    this.#summarize(entry);
    entry.timer = this.#timer(key);
  }

  #summarize(entry: Entry): void {
    if (entry.repeats === 0) return;
    const now = Date.now();
    const fields: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(entry.fields))
      if (!entry.varied.has(name)) fields[name] = value;
    fields.repeated = entry.repeats;
    this.#logger[entry.level](
      fields,
      `${entry.msg} (repeated ${entry.repeats.toLocaleString('en-US')} ` +
        `time${entry.repeats === 1 ? '' : 's'} in the last ${elapsedText(now - entry.windowStart)})`,
    );
    entry.repeats = 0;
    entry.varied.clear();
    entry.windowStart = now;
  }
}
