import { describe, expect, it } from 'vitest';
import { createLogger, scrubSecrets } from '../../src/core/log.ts';
import { isLearnerInfo, resolveLogFormat, type LogEntry } from '../../src/core/log-text.ts';

describe('logger redaction', () => {
  it('redacts Authorization headers and token fields, and scrubs secrets anywhere in a line', () => {
    const lines: string[] = [];
    const secrets = ['plain-secret-1', 'quo"te\\secret'];
    const log = createLogger({ secrets, destination: { write: (l: string) => void lines.push(l) } });
    log.info({ headers: { authorization: 'Bearer plain-secret-1' } }, 'request');
    log.info({ token: 'anything' }, 'token field');
    log.warn({ message: 'service said: bad token quo"te\\secret here' }, 'echo');
    log.error(new Error('failed with plain-secret-1'), 'error');
    const text = lines.join('');
    expect(lines).toHaveLength(4);
    expect(text).not.toContain('plain-secret-1');
    expect(text).not.toContain(JSON.stringify('quo"te\\secret').slice(1, -1));
    expect(text).toContain('[Redacted]');
    expect(text).toContain('service said: bad token [Redacted] here');
  });

  it('scrubs text for Redis and reports', () => {
    expect(scrubSecrets('a tok-1 b tok-1', ['tok-1'])).toBe('a [Redacted] b [Redacted]');
    expect(scrubSecrets('nothing here', ['tok-1', ''])).toBe('nothing here');
  });
});

describe('LOG_FORMAT text', () => {
  function textLogger(secrets: string[], skip?: (e: LogEntry) => boolean) {
    const lines: string[] = [];
    const log = createLogger({
      secrets,
      format: 'text',
      ...(skip ? { text: { skip } } : {}),
      destination: { write: (l: string) => void lines.push(l) },
    });
    return { log, lines };
  }

  it('says each line as one plain sentence: warning:, error:, or the message with who it is about', () => {
    const { log, lines } = textLogger([]);
    log.warn({ appendonly: 'no' }, 'Redis keeps nothing on disk');
    log.error({ err: 'connect ECONNREFUSED' }, 'redis connection error');
    log.info(
      { org: 'acme', learnerId: 42, runId: 'r1', code: 'transferred', status: 200 },
      'transfer outcome',
    );
    log.info({ orgs: ['acme'] }, 'workers started');
    expect(lines).toEqual([
      'warning: Redis keeps nothing on disk\n',
      'error: redis connection error: connect ECONNREFUSED\n',
      'transfer outcome: transferred (HTTP 200) (org acme, learner 42, run r1)\n',
      'workers started\n',
    ]);
  });

  it('scrubs every secret on the text path too, and lets nothing through that a terminal would run', () => {
    const secrets = ['plain-secret-1', 'quo"te\\secret', 'ctl\u0001secret'];
    const { log, lines } = textLogger(secrets);
    log.warn({ headers: { authorization: 'Bearer plain-secret-1' } }, 'request');
    log.warn({ message: 'service said: bad token quo"te\\secret here' }, 'echo');
    log.error(new Error('failed with plain-secret-1'), 'error');
    log.warn({ err: 'odd ctl\u0001secret token' }, 'control');
    log.info('escape \u001b]52;c;aGk=\u0007 in a message');
    const text = lines.join('');
    for (const s of secrets) expect(text).not.toContain(s);
    expect(text).toContain('warning: echo: service said: bad token [Redacted] here');
    expect(text).toContain('error: error: failed with [Redacted]');
    expect(text).toContain('warning: control: odd [Redacted] token');
    expect(text).not.toContain('\u001b');
    expect(lines.every((l) => !l.startsWith('{'))).toBe(true);
  });

  it('leaves out the lines asked (per-learner info), keeps the warnings', () => {
    const { log, lines } = textLogger([], isLearnerInfo);
    log.info({ org: 'acme', learnerId: 1 }, 'transfer outcome');
    log.warn({ org: 'acme', learnerId: 2, code: 'forbidden', status: 403 }, 'transfer outcome');
    log.info('workers started');
    expect(lines).toEqual([
      'warning: transfer outcome: forbidden (HTTP 403) (org acme, learner 2)\n',
      'workers started\n',
    ]);
  });

  it('auto is text at a terminal and JSON elsewhere', () => {
    expect(resolveLogFormat('auto', { isTTY: true })).toBe('text');
    expect(resolveLogFormat('auto', {})).toBe('json');
    expect(resolveLogFormat('json', { isTTY: true })).toBe('json');
    expect(resolveLogFormat('text', {})).toBe('text');
  });
});
