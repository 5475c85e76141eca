// A learner list service that ignores ?page= and answers page 1 for every page (as a proxy that drops
// the query string would): a tiny node:http server, so the walker's strict reading can be shown.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface PageOneServer {
  url: string;
  /** Every `page` query value asked, in arrival order ('' when absent). */
  asked: string[];
  close(): Promise<void>;
}

/** `total` learners (ids 1..total, organization (id-1)%3+1), 100 per page, page 1 always. */
export async function startPageOneServer(total = 250): Promise<PageOneServer> {
  const asked: string[] = [];
  const perPage = 100;
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    asked.push(url.searchParams.get('page') ?? '');
    const data = Array.from({ length: Math.min(perPage, total) }, (_, i) => ({
      id: i + 1,
      code: `L${i + 1}`,
      color: null,
      firstName: 'A',
      lastName: 'B',
      isActive: 1,
      organizationId: (i % 3) + 1,
      parent: null,
      userId: null,
      v2id: null,
    }));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        data,
        pagination: {
          total,
          per_page: perPage,
          current_page: '1',
          last_page: Math.ceil(total / perPage),
          from: 1,
          to: data.length,
        },
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    asked,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
