// The dispatcher every call to the Learner API goes through: undici's EnvHttpProxyAgent, given the proxy
// and TLS settings of the config (core/egress.ts) rather than left to read process.env on its own, so the
// environment loadConfig validated is the one used. With no proxy it is one keep-alive pool per origin,
// as before; through a proxy, each new connection is a CONNECT tunnel and then TLS to the service inside it.
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
    // '' (not undefined): undici would fall back to process.env, which may not be what was validated.
    httpProxy: options.egress?.httpProxy ?? '',
    httpsProxy: options.egress?.httpsProxy ?? '',
    noProxy: options.egress?.noProxy ?? '',
    connections: options.connections,
    pipelining: 1,
    keepAliveTimeout: 10_000,
    // Direct connections (no proxy, or a NO_PROXY host): the connect timeout and the service's TLS.
    connect: { timeout, ...tls },
    // Through the proxy: the timeout of the TCP connection to the proxy, and of its answer to CONNECT (undici
    // waits 300 s for it by default, and a call queued for a connection does not see its abort signal until
    // it has one: a proxy that never answers would hold every call for five minutes)...
    proxyTls: { timeout },
    clientFactory: (origin: URL, opts: object) => new Pool(origin, { ...opts, headersTimeout: timeout }),
    // ...and the TLS to the service inside the tunnel: the private CA and the client certificate are the
    // service's, not the proxy's.
    requestTls: { timeout, ...tls },
    // undici's header and body timers fire before a woken process reads its sockets: off. The request's
    // own deadline (deadline.ts) bounds both phases, and reads what arrived before it gives up.
    headersTimeout: 0,
    bodyTimeout: 0,
  });
}

/** undici's error for a tunnel the proxy refused: "Proxy response (407) !== 200 when HTTP Tunneling". */
const REFUSED = /^Proxy response \((\d{3})\) !== 200 when HTTP Tunneling/;

/**
 * The proxy's CONNECT unanswered within the connect timeout. Only the tunnel's request can time out on its
 * headers: the service's own header timer is off (the call's deadline bounds it).
 */
const UNANSWERED = 'UND_ERR_HEADERS_TIMEOUT';

const REASONS: Record<string, string> = {
  '407': 'it does not accept the credentials of the proxy URL (407 Proxy Authentication Required)',
  '403': 'its policy does not allow this host (403 Forbidden)',
  '502': 'it could not reach the service (502 Bad Gateway)',
  '503': 'it could not reach the service (503 Service Unavailable)',
  '504': 'it timed out reaching the service (504 Gateway Timeout)',
};

/**
 * A tunnel the proxy did not open, said for a person (which proxy, masked, and which variable to fix), as
 * LT_PROXY_TUNNEL: nothing reached the service (classify.ts counts it as not sent). Other errors pass.
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
