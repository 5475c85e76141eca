// The egress settings as loadConfig reads them: the proxy variables in both cases, LEARNER_API_TLS_CA and
// the client certificate pair (read once, errors naming the variable and the path, never the contents),
// the NO_PROXY rule the start-up line states, and the proxy password kept out of every message.
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reportCliError } from '../../src/cli/shared.ts';
import { ConfigError, LearnerTransferError } from '../../src/core/errors.ts';
import { loadConfig, secretsOf, type Env } from '../../src/core/config.ts';
import { bypassesProxy, describeEgress, maskProxyUrl } from '../../src/core/egress.ts';
import { makeTlsFiles, type TlsFiles } from '../helpers/redis-ha.ts';

let dir: string;
let tls: TlsFiles;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'lt-egress-config-'));
  tls = makeTlsFiles(join(dir, 'tls'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function problemsOf(env: Env): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('LEARNER_API_TLS_CA, LEARNER_API_TLS_CERT, LEARNER_API_TLS_KEY', () => {
  it('reads the files once at start: their contents are in the egress, the paths in the config', () => {
    const config = loadConfig({
      LEARNER_API_TLS_CA: tls.caFile,
      LEARNER_API_TLS_CERT: tls.certFile,
      LEARNER_API_TLS_KEY: tls.keyFile,
    });
    expect(config.egress.tlsFiles).toEqual({ ca: tls.caFile, cert: tls.certFile, key: tls.keyFile });
    expect(config.egress.tls.ca?.equals(tls.ca)).toBe(true);
    expect(config.egress.tls.cert?.toString()).toContain('BEGIN CERTIFICATE');
    expect(config.egress.tls.key?.toString()).toContain('PRIVATE KEY');
    // The key is not in what a JSON dump of the config shows.
    expect(JSON.stringify(config)).not.toContain('PRIVATE KEY');
  });

  it('a path that cannot be read names the variable, the path and the reason', () => {
    const missing = join(dir, 'no-such-ca.pem');
    expect(problemsOf({ LEARNER_API_TLS_CA: missing })).toEqual([
      `LEARNER_API_TLS_CA ${missing}: cannot read it (ENOENT)`,
    ]);
    expect(problemsOf({ LEARNER_API_TLS_CA: dir })).toEqual([
      `LEARNER_API_TLS_CA ${dir}: not a regular file`,
    ]);
  });

  it('a file of the wrong kind is refused without its contents in the message', () => {
    // The key where the CA belongs: a PEM file, but no certificate in it.
    const problems = problemsOf({ LEARNER_API_TLS_CA: tls.keyFile });
    expect(problems).toEqual([
      `LEARNER_API_TLS_CA ${tls.keyFile}: not a PEM file of the expected kind (no -----BEGIN CERTIFICATE----- line)`,
    ]);
    const text = join(dir, 'notes.txt');
    writeFileSync(text, 'secret-looking words that must not be echoed\n');
    const p = problemsOf({ LEARNER_API_TLS_CERT: text, LEARNER_API_TLS_KEY: text });
    expect(p).toHaveLength(2);
    expect(p.join('\n')).not.toContain('secret-looking');
  });

  it('a certificate without its key (or a key without its certificate) is refused', () => {
    const both =
      'LEARNER_API_TLS_CERT, LEARNER_API_TLS_KEY: set both (paths of the PEM client certificate and its key) or neither';
    expect(problemsOf({ LEARNER_API_TLS_CERT: tls.certFile })).toEqual([both]);
    expect(problemsOf({ LEARNER_API_TLS_KEY: tls.keyFile })).toEqual([both]);
  });

  it("a key that is not the certificate's is refused at start, by TLS's own check", () => {
    const other = join(dir, 'other.key');
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    writeFileSync(other, privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const [problem, ...rest] = problemsOf({ LEARNER_API_TLS_CERT: tls.certFile, LEARNER_API_TLS_KEY: other });
    expect(rest).toEqual([]);
    expect(problem).toMatch(
      new RegExp(
        `^LEARNER_API_TLS_CERT ${tls.certFile}, LEARNER_API_TLS_KEY ${other}: refused by TLS \\(.*mismatch`,
      ),
    );
    expect(problem).not.toContain('BEGIN');
  });
});

describe('HTTPS_PROXY, HTTP_PROXY, NO_PROXY', () => {
  it('reads both cases, the lower case first (as undici and curl do); the HTTPS proxy falls back to the HTTP one', () => {
    const both = loadConfig({
      https_proxy: 'http://lower:3128',
      HTTPS_PROXY: 'http://upper:3128',
      NO_PROXY: 'localhost,.internal',
    }).egress;
    expect(both.httpsProxy).toBe('http://lower:3128');
    expect(both.noProxy).toBe('localhost,.internal');
    const httpOnly = loadConfig({ HTTP_PROXY: 'http://only-http:3128' }).egress;
    expect(httpOnly.httpsProxy).toBe('http://only-http:3128');
    expect(httpOnly.httpProxy).toBe('http://only-http:3128');
    const none = loadConfig({}).egress;
    expect([none.httpProxy, none.httpsProxy, none.noProxy]).toEqual([undefined, undefined, undefined]);
  });

  it('a proxy URL that is not http(s) is refused, its password masked in the message', () => {
    const problems = problemsOf({ HTTPS_PROXY: 'socks5://user:hunter2-secret@proxy:1080' });
    expect(problems).toEqual([
      "HTTPS_PROXY: expected a proxy URL like http://proxy.internal:3128 (http or https), got 'socks5://user:***@proxy:1080'",
    ]);
    const unparsed = problemsOf({ http_proxy: 'user:hunter2-secret@' });
    expect(unparsed.join('\n')).toContain('http_proxy:');
    expect(unparsed.join('\n')).not.toContain('hunter2');
  });

  it('the password is a secret: scrubbed from logs and CLI errors in both its forms, absent from the config dump', () => {
    const password = 'p@ss/w0rd-Secret';
    const url = `http://ops:${encodeURIComponent(password)}@proxy.internal:3128`;
    const config = loadConfig({ HTTPS_PROXY: url });
    expect(secretsOf(config)).toEqual(expect.arrayContaining([password, encodeURIComponent(password)]));
    expect(JSON.stringify(config)).not.toContain('w0rd');

    // An error quoting the proxy URL, as undici's could, reaches a person scrubbed.
    let out = '';
    reportCliError(
      new LearnerTransferError('LT_PROXY_TUNNEL', `failed via ${url} (${password})`),
      (t) => (out += t),
      { HTTPS_PROXY: url },
    );
    expect(out).toContain('failed via');
    expect(out).not.toContain('w0rd');
  });
});

describe('the start-up line and the NO_PROXY rule', () => {
  it('NO_PROXY matches as undici does: a host, its subdomains, a port, a leading dot or *., and *', () => {
    const cases: [string, string, boolean][] = [
      ['https://api.example.com', 'api.example.com', true],
      ['https://api.example.com', 'example.com', true],
      ['https://api.example.com', '.example.com', true],
      ['https://api.example.com', '*.example.com', true],
      ['https://api.example.com', 'xample.com', false],
      ['https://api.example.com', 'api.example.com:8443', false],
      ['https://api.example.com:8443', 'api.example.com:8443', true],
      ['https://api.example.com', 'other.org, api.example.com', true],
      ['https://api.example.com', '*', true],
      ['https://api.example.com', '', false],
      ['https://127.0.0.1:9000', '127.0.0.1', true],
    ];
    for (const [url, noProxy, bypass] of cases)
      expect([url, noProxy, bypassesProxy(url, noProxy)]).toEqual([url, noProxy, bypass]);
  });

  it('says which proxy (masked) and what bypasses it', () => {
    const egress = loadConfig({
      HTTPS_PROXY: 'http://ops:topsecret@proxy.internal:3128',
      NO_PROXY: '.cluster.local',
      LEARNER_API_TLS_CA: tls.caFile,
    }).egress;
    expect(describeEgress('https://api.example.com/v', egress)).toBe(
      'Learner API https://api.example.com: through the proxy http://ops:***@proxy.internal:3128; ' +
        `NO_PROXY: .cluster.local; trusting only the CA of LEARNER_API_TLS_CA ${tls.caFile}`,
    );
    expect(describeEgress('https://learner.cluster.local', egress)).toContain(
      'direct, its host is in NO_PROXY (proxy http://ops:***@proxy.internal:3128 not used)',
    );
    expect(maskProxyUrl('http://onlyuser@proxy:3128')).toBe('http://***@proxy:3128');
  });
});
