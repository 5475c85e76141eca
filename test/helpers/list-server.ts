// A learner list service whose every answer a test writes (a tiny node:http server): to show what the
// page walker does with a service that claims what it cannot have, or lies outright.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ListServer {
  url: string;
  /** Every page asked, in arrival order (NaN when `page` was absent or not a number). */
  asked: number[];
  close(): Promise<void>;
}

/** A learner of the list: `id`, in organization `org`, active, with a user. */
export function listLearner(id: number, org: number) {
  return {
    id,
    code: `L${id}`,
    color: null,
    firstName: 'A',
    lastName: 'B',
    isActive: 1,
    organizationId: org,
    parent: null,
    userId: id,
    v2id: null,
  };
}

/**
 * Answers GET /1/learner?page=N with `answer(N, asked)` as JSON (200). `asked` lets a test end a walk
 * that would otherwise never end (an abort after so many requests), so a failing test fails fast.
 */
export async function startListServer(answer: (page: number, asked: number) => unknown): Promise<ListServer> {
  const asked: number[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const page = Number(url.searchParams.get('page') ?? 'NaN');
    asked.push(page);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer(page, asked.length)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    asked,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
