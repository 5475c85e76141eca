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

/** A destination wrapper that replaces every secret in a serialized line before it is written. */
function scrubbing(dest: DestinationStream, secrets: readonly string[]): DestinationStream {
  const list = secrets.filter((s) => s.length > 0);
  if (list.length === 0) return dest;
  return {
    write(line: string) {
      let out = line;
      for (const s of list) if (out.includes(s)) out = out.split(s).join('[Redacted]');
      dest.write(out);
    },
  };
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
