// The learner page and its API: the record and audit entries, the states of many learners (to
// follow retried rows live), and POST .../urgent, "Move ahead of the queue", for a waiting
// learner, through the producer as `enqueue --priority urgent` (docs/dashboard-api.md).
import type { FastifyInstance } from 'fastify';
import {
  isFinalBucket,
  isSuccessBucket,
  toLearnerOutcome,
  type Bucket,
  type LearnerOutcome,
} from '../../outcomes/record.ts';
import { appendChange } from '../../limiter/control-log.ts';
import { actorOf, roleOf } from '../auth.ts';
import { queuePlace, urgentChange, type QueuePlace, type UrgentBatch } from '../../queue/priority.ts';
import {
  badRequest,
  DashboardError,
  knownOrg,
  learnerIdParam,
  learnersByOrg,
  mayNotAct,
  notFound,
  pageContext,
  sendPage,
  type DashboardDeps,
} from '../deps.ts';
import { FAILURE_BUCKETS } from '../../outcomes/record.ts';
import { LEARNER_JS } from '../assets.ts';
import { describePlace, learnerPage } from '../views/learner.ts';
import { auditEntriesById } from '../../ops/audit/search.ts';
import { redactForViewer } from '../../ops/audit/redact.ts';
import type { RecordStory } from '../../outcomes/story.ts';

const MAX_IDS = 500;

/** Why a learner in this state is not moved ahead. */
function notWaiting(learnerId: number, state: Bucket): string {
  if (isSuccessBucket(state))
    return `learner ${learnerId} is already ${state}: there is nothing to move ahead`;
  return `learner ${learnerId} is not in the queue (it ended ${state}): retry it to queue it again, then move it ahead`;
}

const isWaiting = (state: string) => state === 'queued' || state === 'retrying';

export function registerLearner(app: FastifyInstance, deps: DashboardDeps): void {
  const { ctx } = deps;
  // The viewer sees counts, roles and user ids of revoked authorizations, never e-mails or names.
  const load = async (orgParam: string, idParam: string, viewer: boolean) => {
    const org = knownOrg(deps, orgParam);
    const id = learnerIdParam(idParam);
    // Entries trimmed from Redis are read from the audit archive, by their day file.
    const sources = {
      stream: ctx.store.auditStream(),
      archiveDir: ctx.config.auditArchiveDir,
      read: (o: string, ids: readonly string[]) => ctx.store.auditEntries(o, ids),
    };
    // Asked only for an entry the stream no longer holds: the archive alone is read.
    const storyFromArchive = async (entryId: string) => {
      const archiveOnly = { ...sources, read: async () => [] };
      const entry = (await auditEntriesById(archiveOnly, org, [entryId])).found[0]?.entry;
      return entry?.kind === 'record' ? (entry.result as RecordStory) : undefined;
    };
    // A finished learner's history and audit ids: in the stream (compacted record), or the archive.
    const { record, archived: storyArchived } =
      (await ctx.store.getWithStory(org, id, storyFromArchive)) ?? {};
    if (!record) throw notFound(`no record of learner ${id} in ${org}`);
    const { found, missing } = await auditEntriesById(sources, org, record.au ?? []);
    const audit = found.map((f) => (viewer ? redactForViewer(f.entry) : f.entry));
    const archived = found.filter((f) => f.file).map((f) => ({ id: f.entry.id, file: f.file ?? '' }));
    return {
      learner: toLearnerOutcome(org, id, record),
      audit,
      auditArchived: archived,
      auditMissing: missing,
      /** Some history and audit ids could not be read: their story entry is archived out of reach. */
      storyArchived: storyArchived === true,
    };
  };

  app.get<{ Params: { org: string; id: string } }>('/api/learners/:org/:id', async (req) =>
    load(req.params.org, req.params.id, roleOf(req) === 'viewer'),
  );
  app.get<{ Params: { org: string; id: string } }>('/learners/:org/:id', async (req, reply) => {
    const { learner, audit, auditArchived, auditMissing, storyArchived } = await load(
      req.params.org,
      req.params.id,
      roleOf(req) === 'viewer',
    );
    const retryable = FAILURE_BUCKETS.includes(learner.state as Bucket);
    const queue = isWaiting(learner.state)
      ? {
          place: await queuePlace(ctx.redis, ctx.queues.get(learner.org), learner.learnerId),
          canMoveAhead: !mayNotAct(deps, req),
        }
      : undefined;
    return sendPage(
      reply,
      learnerPage(pageContext(deps, '/learners', req), learner, audit, retryable, queue, {
        archived: auditArchived,
        missing: auditMissing,
        storyArchived,
      }),
    );
  });
  app.get('/assets/learner.js', async (_req, reply) =>
    reply
      .type('text/javascript; charset=utf-8')
      .header('cache-control', 'public, max-age=300')
      .send(LEARNER_JS),
  );
  app.post<{ Params: { org: string; id: string } }>('/api/learners/:org/:id/urgent', async (req, reply) =>
    reply.send(await moveAhead(deps, req.params.org, req.params.id, actorOf(req))),
  );
  app.get<{ Querystring: { ids?: string } }>('/api/learners', async (req) =>
    learnerStates(deps, req.query.ids),
  );
}

/**
 * Moves a waiting learner ahead of its organization's queue, as `enqueue --priority urgent` does;
 * any other state is refused with its reason.
 */
async function moveAhead(
  deps: DashboardDeps,
  orgParam: string,
  idParam: string,
  who: string,
): Promise<{ learner: string; result: string; place: QueuePlace; placeText: string; message: string }> {
  const { ctx } = deps;
  if (deps.readOnly) {
    throw new DashboardError(
      'LT_HTTP_READ_ONLY',
      'this dashboard runs with --read-only: moving learners ahead of the queue is off',
    );
  }
  const org = knownOrg(deps, orgParam);
  const id = learnerIdParam(idParam);
  const record = await ctx.store.get(org, id);
  if (!record) throw notFound(`no record of learner ${id} in ${org}`);
  if (isFinalBucket(record.b as Bucket)) {
    throw new DashboardError('LT_HTTP_NOT_WAITING', notWaiting(id, record.b as Bucket));
  }
  // Through the producer: its claim, its outcome record (kept: the learner waits) and its job id; a
  // learner that finished meanwhile is not re-queued.
  let batch: UrgentBatch | undefined;
  let held: string | undefined;
  await ctx.producer.add([{ org, learnerId: id, source: 'dashboard' }], record.r, {
    priority: 'urgent',
    onUrgent: (b) => {
      batch = b;
    },
    onClaimedElsewhere: (h) => {
      held = h.reason;
    },
  });
  if (held !== undefined) throw new DashboardError('LT_HTTP_HELD_ELSEWHERE', held);
  const done = batch as UrgentBatch | undefined;
  if (!done || done.gone.length > 0) {
    const now = await ctx.store.get(org, id);
    const state = (now?.b ?? record.b) as Bucket;
    throw new DashboardError(
      'LT_HTTP_NOT_WAITING',
      isFinalBucket(state) ? notWaiting(id, state) : `learner ${id} left the queue meanwhile: nothing moved`,
    );
  }
  if (done.inFlight.length > 0) {
    throw new DashboardError(
      'LT_HTTP_IN_FLIGHT',
      `learner ${id} is being transferred right now: there is nothing to move ahead`,
    );
  }
  await appendChange(ctx.redis, ctx.keys, urgentChange(done, who, 'dashboard'));
  const place = await queuePlace(ctx.redis, ctx.queues.get(org), id);
  const result = done.added.length > 0 ? 'added' : 'moved';
  ctx.logger.info({ org, learnerId: id, result, who }, 'dashboard: learner moved ahead of the queue');
  return {
    learner: `${org}:${id}`,
    result,
    place,
    placeText: describePlace(place),
    message: `learner ${id} moved ahead of the queue: ${describePlace(place)}`,
  };
}

/** The states of many learners (org:id,...), for following retried rows live. */
async function learnerStates(
  deps: DashboardDeps,
  idsParam: string | undefined,
): Promise<{ learners: LearnerOutcome[] }> {
  const { ctx } = deps;
  const keys = (idsParam ?? '').split(',').filter(Boolean);
  if (keys.length === 0) throw badRequest('ids: expected org:learnerId pairs separated by commas');
  if (keys.length > MAX_IDS) throw badRequest(`ids: at most ${MAX_IDS} learners per request`);
  const byOrg = learnersByOrg(deps, keys, 'ids');
  const learners: LearnerOutcome[] = [];
  for (const [org, ids] of byOrg) {
    const records = await ctx.store.getMany(org, ids);
    ids.forEach((id, i) => {
      const r = records[i];
      if (r) learners.push(toLearnerOutcome(org, id, r));
    });
  }
  return { learners };
}
