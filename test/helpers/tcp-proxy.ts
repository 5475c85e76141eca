// A TCP proxy in front of the simulator that can go down for real: while down, nothing listens on its
// port (connections are refused) and the connections it had are cut, as when the service's host stops.
// In front of a Redis it counts round trips: a turn is the client speaking again after the server
// answered, on one connection, so a pipeline of 7,000 commands is one turn and 7,000 awaited commands
// are 7,000.
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  port: number;
  url: string;
  down(): Promise<void>;
  /** Round trips (turns, summed over connections) and bytes sent upstream since the last resetCounts. */
  counts(): { turns: number; bytesUp: number };
  resetCounts(): void;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  let turns = 0;
  let bytesUp = 0;
  const listen = async () => {
    const s = createServer((client) => {
      const upstream = connect(targetPort, '127.0.0.1');
      for (const sock of [client, upstream]) {
        sockets.add(sock);
        sock.on('close', () => sockets.delete(sock));
        sock.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      // Who spoke last on this connection: the client speaking after the server is a new round trip.
      let answered = true;
      client.on('data', (d: Buffer) => {
        bytesUp += d.length;
        if (answered) turns += 1;
        answered = false;
      });
      upstream.on('data', () => (answered = true));
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => resolve());
    });
    const address = s.address();
    if (typeof address === 'object' && address) port = address.port;
    server = s;
  };
  const down = async () => {
    const s = server;
    server = undefined;
    if (!s) return;
    const closed = new Promise<void>((resolve) => s.close(() => resolve()));
    for (const sock of sockets) sock.destroy();
    await closed;
  };
  await listen();
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    down,
    async up() {
      if (!server) await listen();
    },
    close: down,
    counts: () => ({ turns, bytesUp }),
    resetCounts() {
      turns = 0;
      bytesUp = 0;
    },
  };
}
