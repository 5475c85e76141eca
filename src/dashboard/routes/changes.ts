// GET /changes and GET /api/changes: the change log, newest first, filtered by action,
// organization and author in the query (a filtered log is a link), paged with `before`.
import type { FastifyInstance } from 'fastify';
import * as z from 'zod';
import { isValidOrgKey } from '../../core/keys.ts';
import { readChanges, type ChangeFilter } from '../../limiter/control-log.ts';
import { summarizeChange, type ChangeRow } from '../../ops/views/controls.ts';
import { badRequest, pageContext, sendPage, type DashboardDeps } from '../deps.ts';
import { changesPage } from '../views/changes.ts';

const changesQuery = z.object({
  action: z.string().optional(),
  org: z.string().optional(),
  who: z.string().optional(),
  before: z.string().optional(),
  limit: z.string().optional(),
});

const ACTION_RE = /^[a-z][a-z.-]{0,39}$/;
const STREAM_ID_RE = /^\d{1,20}-\d{1,20}$/;

interface ParsedChanges {
  filter: { action?: string | undefined; org?: string | undefined; who?: string | undefined };
  before: string | undefined;
  limit: number;
}

function parseChangesQuery(raw: unknown): ParsedChanges {
  const parsed = changesQuery.safeParse(raw ?? {});
  if (!parsed.success) throw badRequest('query: expected action, org, who, before and limit as text');
  const q = parsed.data;
  const action = q.action?.trim() || undefined;
  if (action !== undefined && !ACTION_RE.test(action))
    throw badRequest(
      `action: expected an action like retry, pause or limits. (a prefix), got '${action.slice(0, 40)}'`,
    );
  const org = q.org?.trim() || undefined;
  // An organization no longer configured may still be in the log: any well-formed key is asked for.
  if (org !== undefined && !isValidOrgKey(org))
    throw badRequest(`org: expected an organization key, got '${org.slice(0, 64)}'`);
  const who = q.who?.trim() || undefined;
  if (who !== undefined && (who.length > 80 || /[^\x20-\x7e]/.test(who)))
    throw badRequest('who: expected up to 80 printable characters (part of an author, like alice or cli:)');
  const before = q.before || undefined;
  if (before !== undefined && !STREAM_ID_RE.test(before))
    throw badRequest(`before: expected a change id like 1795000412179-0, got '${before.slice(0, 40)}'`);
  const limit = q.limit === undefined || q.limit === '' ? 50 : Number(q.limit);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 500) throw badRequest('limit: expected 1 to 500');
  return { filter: { action, org, who }, before, limit };
}

async function read(
  deps: DashboardDeps,
  p: ParsedChanges,
): Promise<{ changes: ChangeRow[]; older: string | undefined }> {
  const options: ChangeFilter = { count: p.limit };
  if (p.filter.action) options.action = p.filter.action;
  if (p.filter.org) options.org = p.filter.org;
  if (p.filter.who) options.who = p.filter.who;
  if (p.before) options.before = p.before;
  const entries = await readChanges(deps.ctx.redis, deps.ctx.keys, options);
  const changes = entries.map((e) => ({ ...e, summary: summarizeChange(e) }));
  return { changes, older: changes.length === p.limit ? changes.at(-1)?.id : undefined };
}

export function registerChanges(app: FastifyInstance, deps: DashboardDeps): void {
  app.get('/api/changes', async (req) => {
    const p = parseChangesQuery(req.query);
    return { filter: p.filter, ...(await read(deps, p)) };
  });
  app.get('/changes', async (req, reply) => {
    const p = parseChangesQuery(req.query);
    const { changes, older } = await read(deps, p);
    return sendPage(
      reply,
      changesPage(pageContext(deps, '/changes', req), {
        filter: p.filter,
        limit: p.limit,
        orgs: deps.ctx.config.orgs,
        changes,
        older,
      }),
    );
  });
}
