// A real HTTP receiver of notifications (node:http on port 0): it keeps every POST, and answers each as
// the test says (a status, or never).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: IncomingMessage['headers'];
  raw: string;
  body: Record<string, unknown>;
}

/** A status, or 'hang': the request is held open and never answered. */
export type Answer = number | 'hang';

export interface Receiver {
  /** With a secret-looking path, as Slack's webhooks have. */
  url: string;
  /** The path alone (the secret part). */
  secretPath: string;
  received: Received[];
  /** Requests held open now (answer 'hang'). */
  readonly hanging: number;
  /** How the n-th request (from 0) is answered; default 200. */
  answer: (n: number, body: Record<string, unknown>) => Answer;
  /** The POSTs of one event kind. */
  of(event: string): Received[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const secretPath = `/services/T0NOTIFY/B0HOOK/${Math.random().toString(36).slice(2)}x9sEcReT`;
  const held = new Set<ServerResponse>();
  let n = 0;
  const r = {
    received: [] as Received[],
    answer: (() => 200) as Receiver['answer'],
    get hanging() {
      return held.size;
    },
  } as Receiver;
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(raw) as Record<string, unknown>;
      } catch {
        body = {};
      }
      r.received.push({ path: req.url ?? '', headers: req.headers, raw, body });
      const a = r.answer(n++, body);
      if (a === 'hang') {
        held.add(res);
        res.on('close', () => held.delete(res));
        return;
      }
      res.writeHead(a, { 'content-type': 'text/plain' }).end(a < 300 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  r.url = `http://127.0.0.1:${port}${secretPath}`;
  r.secretPath = secretPath;
  r.of = (event) => r.received.filter((x) => x.body.event === event);
  r.close = async () => {
    for (const res of held) res.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return r;
}
