// pino, with two layers against leaking a token: path redaction of the usual places (Authorization
// headers, token fields), and a last-resort scrub of every known secret from the serialized line.
import { pino, type Logger, type DestinationStream } from 'pino';

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

export interface LogOptions {
  level?: string;
  /** Secrets to scrub from every line, whatever field they hide in. */
  secrets?: readonly string[];
  /** Where lines go (default: stderr, so stdout stays for a command's own output). */
  destination?: DestinationStream;
  name?: string;
}

/** Every form a secret can take in text we write: as is, and JSON-escaped (inside a serialized line). */
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

/** scrubSecrets for many texts: the forms of the secrets are worked out once. */
export function secretScrubber(secrets: readonly string[]): (text: string) => string {
  const forms = secretForms(secrets);
  return (text) => redactForms(text, forms);
}

function redactForms(text: string, forms: readonly string[]): string {
  let out = text;
  for (const s of forms) if (out.includes(s)) out = out.split(s).join('[Redacted]');
  return out;
}

/** A destination wrapper that replaces every secret in a serialized line before it is written. */
function scrubbing(dest: DestinationStream, secrets: readonly string[]): DestinationStream {
  const forms = secretForms(secrets);
  if (forms.length === 0) return dest;
  return { write: (line: string) => dest.write(redactForms(line, forms)) };
}

export function createLogger(options: LogOptions = {}): Logger {
  const dest = options.destination ?? pino.destination({ dest: 2, sync: false });
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
