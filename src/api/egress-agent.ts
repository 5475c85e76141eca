// The dispatcher of every call to the Learner API: undici's EnvHttpProxyAgent, given the
// validated egress settings (core/egress.ts) instead of reading process.env itself.
import { EnvHttpProxyAgent, Pool, type Dispatcher } from 'undici';
import { bypassesProxy, maskProxyUrl, type Egress } from '../core/egress.ts';
import { LearnerTransferError } from '../core/errors.ts';

export interface DispatcherOptions {
  connections: number;
  connectTimeoutMs: number;
  egress?: Egress | undefined;
}

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const tls = options.egress?.tls ?? {};
  const timeout = options.connectTimeoutMs;
  return new EnvHttpProxyAgent({
    // '' (not undefined): undici would fall back to process.env.
    httpProxy: options.egress?.httpProxy ?? '',
    httpsProxy: options.egress?.httpsProxy ?? '',
    noProxy: options.egress?.noProxy ?? '',
    connections: options.connections,
    pipelining: 1,
    keepAliveTimeout: 10_000,
    // Direct (no proxy, or a NO_PROXY host): the connect timeout and the service's TLS.
    connect: { timeout, ...tls },
    // Through the proxy: the TCP connect and its answer to CONNECT are bounded (undici waits
    // 300 s, and a queued call sees no abort until it has a connection).
    proxyTls: { timeout },
    clientFactory: (origin: URL, opts: object) => new Pool(origin, { ...opts, headersTimeout: timeout }),
    // ...and the TLS to the service inside the tunnel (the CA and client certificate are the
    // service's).
    requestTls: { timeout, ...tls },
    // undici's header and body timers fire before a woken process reads its sockets: off
    // (deadline.ts bounds both).
    headersTimeout: 0,
    bodyTimeout: 0,
  });
}

/** undici's error for a tunnel the proxy refused ("Proxy response (407) !== 200 ..."). */
const REFUSED = /^Proxy response \((\d{3})\) !== 200 when HTTP Tunneling/;

/** The proxy's CONNECT unanswered within the connect timeout (the only header timer left on). */
const UNANSWERED = 'UND_ERR_HEADERS_TIMEOUT';

const REASONS: Record<string, string> = {
  '407': 'it does not accept the credentials of the proxy URL (407 Proxy Authentication Required)',
  '403': 'its policy does not allow this host (403 Forbidden)',
  '502': 'it could not reach the service (502 Bad Gateway)',
  '503': 'it could not reach the service (503 Service Unavailable)',
  '504': 'it timed out reaching the service (504 Gateway Timeout)',
};

/**
 * A tunnel the proxy did not open, said for a person as LT_PROXY_TUNNEL (never sent); other
 * errors pass.
 */
export function explainProxyRefusal(
  err: unknown,
  baseUrl: URL,
  egress: Egress | undefined,
  connectTimeoutMs: number,
): unknown {
  const https = baseUrl.protocol === 'https:';
  const proxy = https ? egress?.httpsProxy : egress?.httpProxy;
  if (!proxy || bypassesProxy(baseUrl.href, egress?.noProxy)) return err;
  const refused = REFUSED.exec((err as Error | undefined)?.message ?? '');
  const unanswered = (err as { code?: unknown } | undefined)?.code === UNANSWERED;
  if (!refused && !unanswered) return err;
  const why = refused
    ? `refused the tunnel to ${baseUrl.host}: ${REASONS[refused[1]!] ?? `it answered ${refused[1]!}`}`
    : `did not answer the tunnel request to ${baseUrl.host} within CONNECT_TIMEOUT (${connectTimeoutMs} ms)`;
  const variable = https ? 'HTTPS_PROXY (or HTTP_PROXY)' : 'HTTP_PROXY';
  return new LearnerTransferError(
    'LT_PROXY_TUNNEL',
    `the proxy ${maskProxyUrl(proxy)} ${why}; check ${variable}`,
    {
      cause: err,
    },
  );
}
