// pino, with two layers against leaking a token: redaction of the usual paths, and a
// last-resort scrub of every known secret from the serialized line.
import { pino, type Logger, type DestinationStream } from 'pino';
import { LearnerTransferError } from './errors.ts';
import { textLine, type LogFormat, type TextLogOptions } from './log-text.ts';

export type { Logger } from 'pino';

const REDACT_PATHS = [
  'token',
  'secret',
  'authorization',
  'Authorization',
  '*.token',
  '*.secret',
  '*.authorization',
  '*.Authorization',
  'headers.authorization',
  'req.headers.authorization',
  '*.headers.authorization',
  '*.headers.Authorization',
];

/**
 * The secrets to scrub: a list, or a getter for secrets that change (a token file's reload). A
 * getter returns the same array until they change: forms are worked out again only then.
 */
export type Secrets = readonly string[] | (() => readonly string[]);

export interface LogOptions {
  level?: string;
  /** Secrets to scrub from every line, whatever field they hide in. */
  secrets?: Secrets;
  /** Where lines go (default: stderr, so stdout stays for a command's own output). */
  destination?: DestinationStream;
  name?: string;
  /** json (default): pino's lines; text: one plain sentence a line (core/log-text.ts). */
  format?: LogFormat;
  /** With format text: lines to leave out. */
  text?: TextLogOptions;
}

/** Every form a secret can take in text we write: as is, and JSON-escaped. */
function secretForms(secrets: readonly string[]): string[] {
  const forms = new Set<string>();
  for (const s of secrets) {
    if (s.length === 0) continue;
    forms.add(s);
    forms.add(JSON.stringify(s).slice(1, -1));
  }
  return [...forms];
}

/** Replaces every secret in a text (the service's error messages may echo what they were sent). */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  return redactForms(text, secretForms(secrets));
}

/** scrubSecrets for many texts: the secrets' forms are worked out once. */
export function secretScrubber(secrets: Secrets): (text: string) => string {
  const forms = liveForms(secrets);
  return (text) => redactForms(text, forms());
}

/** The forms of the secrets now, cached until a getter returns another array. */
function liveForms(secrets: Secrets): () => readonly string[] {
  if (typeof secrets !== 'function') {
    const forms = secretForms(secrets);
    return () => forms;
  }
  let seen: readonly string[] | undefined;
  let forms: readonly string[] = [];
  return () => {
    const now = secrets();
    if (now !== seen) {
      seen = now;
      forms = secretForms(now);
    }
    return forms;
  };
}

function redactForms(text: string, forms: readonly string[]): string {
  let out = text;
  for (const s of forms) if (out.includes(s)) out = out.split(s).join('[Redacted]');
  return out;
}

/** A destination wrapper that replaces every secret in a serialized line before it is written. */
function scrubbing(dest: DestinationStream, secrets: Secrets): DestinationStream {
  if (typeof secrets !== 'function' && secretForms(secrets).length === 0) return dest;
  const forms = liveForms(secrets);
  return { write: (line: string) => dest.write(redactForms(line, forms())) };
}

/**
 * A destination that says each serialized line plainly. The sentence is scrubbed again: a secret
 * behind a JSON escape would be plain in it.
 */
function plainText(dest: DestinationStream, secrets: Secrets, options: TextLogOptions): DestinationStream {
  const forms = liveForms(secrets);
  return {
    write: (line: string) => {
      const text = textLine(line, options);
      if (text) dest.write(redactForms(text, forms()));
    },
  };
}

export function createLogger(options: LogOptions = {}): Logger {
  const out = options.destination ?? pino.destination({ dest: 2, sync: false });
  const dest = options.format === 'text' ? plainText(out, options.secrets ?? [], options.text ?? {}) : out;
  return pino(
    {
      level: options.level ?? 'info',
      name: options.name ?? 'learner-transfer',
      redact: { paths: REDACT_PATHS, censor: '[Redacted]' },
      base: { pid: process.pid },
    },
    scrubbing(dest, options.secrets ?? []),
  );
}

/** A function that replaces every secret in a text. */
export type Scrub = (text: string) => string;

/**
 * Text from outside (a response body) with every secret replaced, before anything reads or
 * keeps it. A JSON body that could hide one behind escapes (`\u0041`) is decoded, checked, and
 * re-serialized.
 */
export function scrubResponseText(text: string, scrub: Scrub): string {
  const plain = scrub(text);
  if (!plain.includes('\\')) return plain;
  let parsed: unknown;
  try {
    parsed = JSON.parse(plain);
  } catch {
    return plain; // not JSON: nothing decodes the escapes, the text is what it shows
  }
  let changed = false;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      const s = scrub(v);
      if (s !== v) changed = true;
      return s;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [walk(k) as string, walk(x)]));
    }
    return v;
  };
  try {
    const clean = walk(parsed);
    return changed ? JSON.stringify(clean) : plain;
  } catch {
    return '[response not kept: it could not be checked for secrets]';
  }
}

/**
 * The error to throw to BullMQ with every secret replaced in `message` and `stack`. Changed in
 * place, so its class (UnrecoverableError, DelayedError) still tells BullMQ what to do.
 */
export function scrubError(err: unknown, scrub: Scrub): Error {
  if (!(err instanceof Error)) return new LearnerTransferError('LT_INTERNAL', scrub(String(err)));
  const message = scrub(err.message);
  const frames = (err.stack ?? '')
    .split('\n')
    .filter((l) => /^\s+at /.test(l))
    .map(scrub);
  try {
    err.message = message;
    err.stack = [`${err.name}: ${message}`, ...frames].join('\n');
    return err;
  } catch {
    const copy = new LearnerTransferError('LT_INTERNAL', message);
    copy.stack = `Error: ${message}`;
    return copy;
  }
}
