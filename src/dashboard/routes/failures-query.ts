// The failures filter, from a query string or a retry body: one parser, one set of errors.
import * as z from 'zod';
import type { Bucket } from '../../outcomes/record.ts';
import { badRequest, knownOrg, learnerIdParam, runIdParam, type DashboardDeps } from '../deps.ts';
import type { FailureFilter } from '../../ops/views/failures.ts';
import { FAILURE_BUCKETS } from '../../outcomes/record.ts';

export const filterFields = {
  code: z.string().optional(),
  org: z.string().optional(),
  run: z.string().optional(),
  q: z.string().optional(),
};

export interface FilterInput {
  code?: string | undefined;
  org?: string | undefined;
  run?: string | undefined;
  q?: string | undefined;
}

export async function toFailureFilter(deps: DashboardDeps, input: FilterInput): Promise<FailureFilter> {
  const code = input.code || undefined;
  if (code !== undefined && !FAILURE_BUCKETS.includes(code as Bucket)) {
    throw badRequest(`code: expected one of ${FAILURE_BUCKETS.join(', ')}, got '${code.slice(0, 40)}'`);
  }
  const org = input.org || undefined;
  const run = input.run ? await runIdParam(deps, input.run) : undefined;
  const q = input.q?.trim() || undefined;
  return {
    orgs: org ? [knownOrg(deps, org)] : [...deps.ctx.config.orgs],
    code: code as Bucket | undefined,
    runId: run,
    learnerId: q === undefined ? undefined : learnerIdParam(q, 'q (learner id)'),
  };
}

const pageQuery = z.object({
  ...filterFields,
  offset: z.string().optional(),
  limit: z.string().optional(),
});

export interface ParsedFailureQuery {
  input: FilterInput;
  filter: FailureFilter;
  offset: number;
  limit: number;
}

export async function parseFailureQuery(deps: DashboardDeps, raw: unknown): Promise<ParsedFailureQuery> {
  const parsed = pageQuery.safeParse(raw ?? {});
  if (!parsed.success) throw badRequest('query: expected code, org, run, q, offset and limit as text');
  const { offset: o, limit: l, ...input } = parsed.data;
  const offset = o === undefined || o === '' ? 0 : Number(o);
  const limit = l === undefined || l === '' ? 50 : Number(l);
  if (!Number.isSafeInteger(offset) || offset < 0) throw badRequest(`offset: expected a whole number >= 0`);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 500) throw badRequest('limit: expected 1 to 500');
  return { input, filter: await toFailureFilter(deps, input), offset, limit };
}
