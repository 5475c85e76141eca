// The way out to the Learner API: the proxy variables and LEARNER_API_TLS_CA / _CERT / _KEY, read
// once at start. Messages never show a file's contents or a proxy's password.
import { readFileSync, statSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
/** The environment as loadConfig is given it (not imported: config.ts imports this file). */
type Env = Record<string, string | undefined>;

/** The proxy variables, lower case first, the order undici (and curl) read them in. */
export const PROXY_VARIABLES = [
  'https_proxy',
  'HTTPS_PROXY',
  'http_proxy',
  'HTTP_PROXY',
  'no_proxy',
  'NO_PROXY',
] as const;

/** A PEM file larger than this is no certificate or key (every public CA is ~220 KB). */
const MAX_PEM_BYTES = 1024 * 1024;

export interface Egress {
  /** The proxy for https:// URLs (https_proxy, HTTPS_PROXY, then the HTTP one, as undici does). */
  httpsProxy: string | undefined;
  /** The proxy for http:// URLs (http_proxy, else HTTP_PROXY). */
  httpProxy: string | undefined;
  /** NO_PROXY as given: host names (a leading `.` or `*.` for a domain), `host:port`, or `*`. */
  noProxy: string | undefined;
  /** The PEM contents of LEARNER_API_TLS_CA / _CERT / _KEY. */
  tls: { ca?: Buffer; cert?: Buffer; key?: Buffer };
  /** The files they came from, for messages. */
  tlsFiles: { ca?: string; cert?: string; key?: string };
}

export interface EgressVariables {
  LEARNER_API_TLS_CA?: string | undefined;
  LEARNER_API_TLS_CERT?: string | undefined;
  LEARNER_API_TLS_KEY?: string | undefined;
}

/** The first of the two spellings that is set (empty is unset), with its name. */
function either(env: Env, lower: string, upper: string): { name: string; value: string } | undefined {
  for (const name of [lower, upper]) {
    const value = env[name]?.trim();
    if (value) return { name, value };
  }
  return undefined;
}

/**
 * The user part of a URL-like text, by position: between the scheme's `//` (or the start) and the
 * last `@`. A parser reads `user:pw@` as a URL of scheme `user:` and would show the password.
 */
function userinfoOf(text: string): { from: number; at: number } | undefined {
  const at = text.lastIndexOf('@');
  if (at < 0) return undefined;
  const slashes = text.indexOf('//');
  return { from: slashes >= 0 && slashes < at ? slashes + 2 : 0, at };
}

/** A proxy URL with its credentials masked: `http://user:***@proxy:3128`. */
export function maskProxyUrl(text: string): string {
  const info = userinfoOf(text);
  const masked = info
    ? (() => {
        const userinfo = text.slice(info.from, info.at);
        const colon = userinfo.indexOf(':');
        const shown = colon >= 0 ? `${userinfo.slice(0, colon)}:***` : '***';
        return `${text.slice(0, info.from)}${shown}${text.slice(info.at)}`;
      })()
    : text;
  return masked.replace(/\/$/, '');
}

function proxyUrl(
  found: { name: string; value: string } | undefined,
  problems: string[],
): string | undefined {
  if (!found) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(found.value);
  } catch {
    url = undefined;
  }
  if (!url || !['http:', 'https:'].includes(url.protocol) || !url.hostname) {
    problems.push(
      `${found.name}: expected a proxy URL like http://proxy.internal:3128 (http or https), ` +
        `got '${maskProxyUrl(found.value)}'`,
    );
    return undefined;
  }
  return found.value;
}

/** Reads one PEM file; a problem names the variable and the path, never the contents. */
function readPem(name: string, path: string, what: RegExp, problems: string[]): Buffer | undefined {
  try {
    const stat = statSync(path);
    if (!stat.isFile()) {
      problems.push(`${name} ${path}: not a regular file`);
      return undefined;
    }
    if (stat.size > MAX_PEM_BYTES) {
      problems.push(`${name} ${path}: ${stat.size} bytes, more than a PEM file of this kind holds`);
      return undefined;
    }
    const pem = readFileSync(path);
    if (!what.test(pem.toString('latin1'))) {
      problems.push(`${name} ${path}: not a PEM file of the expected kind (no ${what.source} line)`);
      return undefined;
    }
    return pem;
  } catch (err) {
    problems.push(`${name} ${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    return undefined;
  }
}

const CERT_LINE = /-----BEGIN CERTIFICATE-----/;
const KEY_LINE = /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/;

/** The egress of `env` (the proxy variables are not in the config's schema). */
export function readEgress(env: Env, vars: EgressVariables, problems: string[]): Egress {
  const before = problems.length;
  const httpProxy = proxyUrl(either(env, 'http_proxy', 'HTTP_PROXY'), problems);
  const httpsProxy = proxyUrl(either(env, 'https_proxy', 'HTTPS_PROXY'), problems) ?? httpProxy;
  const noProxy = either(env, 'no_proxy', 'NO_PROXY')?.value;
  const tls: Egress['tls'] = {};
  const tlsFiles: Egress['tlsFiles'] = {};
  const { LEARNER_API_TLS_CA: caFile, LEARNER_API_TLS_CERT: certFile, LEARNER_API_TLS_KEY: keyFile } = vars;
  if (caFile) {
    tlsFiles.ca = caFile;
    const ca = readPem('LEARNER_API_TLS_CA', caFile, CERT_LINE, problems);
    if (ca) tls.ca = ca;
  }
  if (Boolean(certFile) !== Boolean(keyFile)) {
    problems.push(
      'LEARNER_API_TLS_CERT, LEARNER_API_TLS_KEY: set both (paths of the PEM client certificate and its key) or neither',
    );
  } else if (certFile && keyFile) {
    tlsFiles.cert = certFile;
    tlsFiles.key = keyFile;
    const cert = readPem('LEARNER_API_TLS_CERT', certFile, CERT_LINE, problems);
    const key = readPem('LEARNER_API_TLS_KEY', keyFile, KEY_LINE, problems);
    if (cert && key) {
      tls.cert = cert;
      tls.key = key;
    }
  }
  if (problems.length === before) checkTls(tls, tlsFiles, problems);
  return { httpProxy, httpsProxy, noProxy, tls, tlsFiles };
}

/** OpenSSL's own check of the material (a key not the certificate's, a CA that does not parse). */
function checkTls(tls: Egress['tls'], files: Egress['tlsFiles'], problems: string[]): void {
  if (!tls.ca && !tls.cert) return;
  try {
    createSecureContext({ ...tls });
  } catch (err) {
    // OpenSSL's reason ("key values mismatch", "no start line"): never the PEM text.
    const reason = (err as Error).message.split('\n')[0]?.slice(0, 200) ?? 'error';
    const named = [
      files.ca ? `LEARNER_API_TLS_CA ${files.ca}` : undefined,
      files.cert ? `LEARNER_API_TLS_CERT ${files.cert}, LEARNER_API_TLS_KEY ${files.key}` : undefined,
    ].filter(Boolean);
    problems.push(`${named.join('; ')}: refused by TLS (${reason})`);
  }
}

/**
 * Whether a request to `url` bypasses the proxy under `noProxy`, by undici's rule,
 * so the start-up line says what the agent will do.
 */
export function bypassesProxy(url: string, noProxy: string | undefined): boolean {
  if (!noProxy) return false;
  if (noProxy.trim() === '*') return true;
  const u = new URL(url);
  const host = u.host.replace(/:\d*$/, '').toLowerCase();
  const port = Number.parseInt(u.port, 10) || (u.protocol === 'https:' ? 443 : 80);
  for (const entry of noProxy.split(/[,\s]/)) {
    if (!entry) continue;
    const parsed = /^(.+):(\d+)$/.exec(entry);
    const name = (parsed ? parsed[1]! : entry).replace(/^\*?\./, '').toLowerCase();
    if (parsed && Number.parseInt(parsed[2]!, 10) !== port) continue;
    if (host === name || host.endsWith(`.${name}`)) return true;
  }
  return false;
}

/** The passwords (and lone user parts) of the proxy URLs in `env`: secrets to scrub. */
export function proxySecrets(env: Env): string[] {
  const out: string[] = [];
  for (const name of PROXY_VARIABLES) {
    const value = env[name];
    if (!value || name.toLowerCase() === 'no_proxy') continue;
    const info = userinfoOf(value);
    if (!info) continue;
    const userinfo = value.slice(info.from, info.at);
    const colon = userinfo.indexOf(':');
    const secret = colon >= 0 ? userinfo.slice(colon + 1) : userinfo;
    if (secret) out.push(secret, safeDecode(secret));
  }
  return [...new Set(out.filter((s) => s.length > 0))];
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** One line for the log at start: the proxy for `baseUrl` (masked), what bypasses it, TLS. */
export function describeEgress(baseUrl: string, egress: Egress): string {
  const https = new URL(baseUrl).protocol === 'https:';
  const proxy = https ? egress.httpsProxy : egress.httpProxy;
  const parts: string[] = [];
  if (!proxy) parts.push(`Learner API ${new URL(baseUrl).origin}: direct (no proxy set)`);
  else if (bypassesProxy(baseUrl, egress.noProxy)) {
    parts.push(
      `Learner API ${new URL(baseUrl).origin}: direct, its host is in NO_PROXY (proxy ${maskProxyUrl(proxy)} not used)`,
    );
  } else parts.push(`Learner API ${new URL(baseUrl).origin}: through the proxy ${maskProxyUrl(proxy)}`);
  if (proxy)
    parts.push(`NO_PROXY: ${egress.noProxy ? egress.noProxy : '(none: every host goes through it)'}`);
  if (egress.tlsFiles.ca) parts.push(`trusting only the CA of LEARNER_API_TLS_CA ${egress.tlsFiles.ca}`);
  if (egress.tlsFiles.cert) parts.push(`client certificate LEARNER_API_TLS_CERT ${egress.tlsFiles.cert}`);
  return parts.join('; ');
}

/** True when anything of the egress differs from a direct connection with the system's CAs. */
export function egressIsSet(egress: Egress): boolean {
  return Boolean(egress.httpProxy || egress.httpsProxy || egress.tls.ca || egress.tls.cert);
}
