// bull-board under /queues, behind the dashboard's authentication (the hooks of the root instance run
// first) and read-only: a retry must go through the outcome store (POST /api/retry), or the record,
// the run counters and the failures index would not follow the job.
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../app.ts';

export const BULL_BOARD_PATH = '/queues';

export async function mountBullBoard(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(BULL_BOARD_PATH);
  createBullBoard({
    queues: ctx.config.orgs.map(
      (org) =>
        new BullMQAdapter(ctx.queues.get(org) as unknown as ConstructorParameters<typeof BullMQAdapter>[0], {
          readOnlyMode: true,
          displayName: `transfers ${org}`,
        }),
    ),
    // @bull-board/fastify pins its own copy of @bull-board/api: same shapes, separate private fields.
    serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
    options: {
      uiConfig: { boardTitle: 'learner-transfer queues', miscLinks: [{ text: 'Dashboard', url: '/' }] },
    },
  });
  await app.register(serverAdapter.registerPlugin(), { prefix: BULL_BOARD_PATH });
}
