// Logs for a person at a terminal: one plain sentence a line instead of pino's JSON, read back
// from the line pino serialized (redacted and scrubbed). LOG_FORMAT chooses.
import { forTerminal } from './terminal-safe.ts';

/** LOG_FORMAT as configured: `auto` is text at a terminal, JSON otherwise. */
export type LogFormatSetting = 'auto' | 'json' | 'text';
export type LogFormat = 'json' | 'text';

export const LOG_FORMATS: readonly LogFormatSetting[] = ['auto', 'json', 'text'];

/** The format of a log written to `stream` (stderr): auto is text at a terminal only. */
export function resolveLogFormat(setting: LogFormatSetting, stream: { isTTY?: boolean }): LogFormat {
  if (setting !== 'auto') return setting;
  return stream.isTTY ? 'text' : 'json';
}

/** A pino line as an object: its level, its message, its fields. */
export interface LogEntry {
  level: number;
  msg?: string;
  [field: string]: unknown;
}

/** What a line of the given level begins with; info says its message alone. */
function levelWord(level: number): string {
  if (level >= 50) return 'error: ';
  if (level >= 40) return 'warning: ';
  if (level >= 30) return '';
  return 'debug: ';
}

/** The fields that say which learner, organization or run a line is about, in plain words. */
const IDENTIFYING: readonly [field: string, word: string][] = [
  ['org', 'org'],
  ['learnerId', 'learner'],
  ['runId', 'run'],
  ['file', 'file'],
  ['url', ''],
];

function errText(err: unknown): string {
  if (typeof err === 'string') return err;
  if (err && typeof err === 'object' && typeof (err as { message?: unknown }).message === 'string') {
    return (err as { message: string }).message;
  }
  return '';
}

/** One entry as a sentence: `warning: <msg>: <err> (org acme, learner 42)`. */
export function entryText(entry: LogEntry): string {
  const ids = IDENTIFYING.flatMap(([field, word]) => {
    const v = entry[field];
    if (typeof v !== 'string' && typeof v !== 'number') return [];
    return [word ? `${word} ${v}` : String(v)];
  });
  // What happened: an outcome's code (and HTTP status), then the error's or the service's words.
  const code = typeof entry.code === 'string' ? entry.code : '';
  const status = typeof entry.status === 'number' ? ` (HTTP ${entry.status})` : '';
  const err = errText(entry.err) || (typeof entry.message === 'string' ? entry.message : '');
  const msg = entry.msg ?? err;
  const text =
    `${levelWord(entry.level)}${msg}` +
    (code ? `: ${code}${status}` : '') +
    (err && err !== msg ? `: ${err}` : '') +
    (ids.length > 0 ? ` (${ids.join(', ')})` : '');
  // Redis's and the service's words can be in it: nothing a terminal would run, one line.
  return forTerminal(text, { singleLine: true });
}

export interface TextLogOptions {
  /** Lines to leave out (a live progress line says them better: each learner's outcome). */
  skip?: ((entry: LogEntry) => boolean) | undefined;
}

/**
 * A serialized pino line as a plain line, or '' to write nothing; a line not JSON passes as it
 * is.
 */
export function textLine(json: string, options: TextLogOptions = {}): string {
  let entry: LogEntry;
  try {
    entry = JSON.parse(json) as LogEntry;
  } catch {
    return json;
  }
  if (typeof entry !== 'object' || entry === null || typeof entry.level !== 'number') return json;
  if (options.skip?.(entry)) return '';
  return `${entryText(entry)}\n`;
}

/** The per-learner info lines (a transfer's outcome): a live progress line counts them instead. */
export function isLearnerInfo(entry: LogEntry): boolean {
  return entry.level <= 30 && entry.learnerId !== undefined;
}
