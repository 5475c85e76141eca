import { describe, expect, it } from 'vitest';
import { createLogger, scrubSecrets } from '../../src/core/log.ts';

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
