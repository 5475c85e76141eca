// A real forward proxy for the egress tests, as a corporate one behaves: HTTPS goes through CONNECT
// tunnels (the proxy sees the host and port, never the TLS inside), Basic credentials can be required
// (407 without the right ones), and every request it gets is recorded, so a test can assert what went
// through it and what did not. Written on node:http + node:net rather than taken from the `proxy` package:
// forty lines, no dependency, and the test sees every CONNECT and its credentials directly.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';

export interface ProxyRequest {
  method: string;
  /** `host:port` of a CONNECT, the absolute URL of a plain request. */
  target: string;
  /** The user of the Proxy-Authorization header, if any (never the password). */
  user: string | undefined;
  /** Whether the credentials were accepted (true when none are required). */
  accepted: boolean;
}

export interface ConnectProxy {
  port: number;
  /** `http://127.0.0.1:PORT`, or with `user:password@` when credentials are required. */
  url: string;
  readonly seen: readonly ProxyRequest[];
  /** Tunnels whose two sockets (to the client, to the target) are both closed. */
  readonly tunnelsClosed: number;
  /** Answer nothing to CONNECT from now on (a proxy that hangs). */
  hang(on: boolean): void;
  close(): Promise<void>;
}

function credentialsOf(req: IncomingMessage): { user: string; password: string } | undefined {
  const header = req.headers['proxy-authorization'];
  const m = typeof header === 'string' ? /^Basic\s+(\S+)$/i.exec(header) : null;
  if (!m) return undefined;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  return colon < 0 ? undefined : { user: text.slice(0, colon), password: text.slice(colon + 1) };
}

/**
 * Opens the tunnel of an accepted CONNECT: a connection to `target`, answered 200 once it is open (or
 * `answerAfterMs` after), then bytes piped both ways; `onClosed` once both ends have closed.
 */
function tunnel(
  client: Socket,
  head: Buffer,
  target: string,
  sockets: Set<Socket>,
  answerAfterMs: number | undefined,
  onClosed: () => void,
): void {
  const colon = target.lastIndexOf(':');
  const host = target.slice(0, colon).replace(/^\[|\]$/g, '');
  const upstream = connect({ host, port: Number(target.slice(colon + 1)), autoSelectFamily: true });
  sockets.add(upstream);
  upstream.on('close', () => sockets.delete(upstream));
  upstream.on('error', () => client.destroy());
  client.on('error', () => upstream.destroy());
  let open = 2;
  const closed = (): void => {
    open -= 1;
    if (open === 0) onClosed();
  };
  client.on('close', closed);
  upstream.on('close', closed);
  const answer = (): void => {
    if (client.destroyed) {
      upstream.destroy();
      return;
    }
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  };
  upstream.on('connect', () => {
    if (answerAfterMs === undefined) answer();
    else setTimeout(answer, answerAfterMs);
  });
}

export async function startConnectProxy(
  options: {
    user?: string;
    password?: string;
    /** Answer each CONNECT this long after the target accepted (a connection that opens late). */
    answerAfterMs?: number;
  } = {},
): Promise<ConnectProxy> {
  const seen: ProxyRequest[] = [];
  const sockets = new Set<Socket>();
  let hanging = false;
  let tunnelsClosed = 0;
  const check = (req: IncomingMessage): ProxyRequest => {
    const given = credentialsOf(req);
    const accepted =
      options.user === undefined || (given?.user === options.user && given.password === options.password);
    const entry = { method: req.method ?? '', target: req.url ?? '', user: given?.user, accepted };
    seen.push(entry);
    return entry;
  };
  const server: Server = createServer((req, res) => {
    // Plain HTTP through a proxy (absolute-form): recorded and refused, the tests use HTTPS only.
    check(req);
    res.writeHead(501, { connection: 'close' }).end();
  });
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    const entry = check(req);
    if (hanging) return;
    if (!entry.accepted) {
      client.end(
        'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="egress"\r\n' +
          'Content-Length: 0\r\nConnection: close\r\n\r\n',
      );
      return;
    }
    tunnel(client, head, entry.target, sockets, options.answerAfterMs, () => (tunnelsClosed += 1));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const auth =
    options.user === undefined
      ? ''
      : `${encodeURIComponent(options.user)}:${encodeURIComponent(options.password ?? '')}@`;
  return {
    port,
    url: `http://${auth}127.0.0.1:${port}`,
    seen,
    get tunnelsClosed() {
      return tunnelsClosed;
    },
    hang(on) {
      hanging = on;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
