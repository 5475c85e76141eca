// The overview's view, from a query string (the page, /api/overview and /api/live share it): `q`,
// `state`, `page` and `limit`, kept in the URL so a filtered page can be bookmarked and shared.
import * as z from 'zod';
import { DEFAULT_VIEW, type OverviewView } from '../../ops/views/overview.ts';
import { STATE_FILTERS, type StateFilter } from '../../ops/views/org-states.ts';
import { badRequest } from '../deps.ts';

const viewQuery = z.object({
  q: z.string().optional(),
  state: z.string().optional(),
  page: z.string().optional(),
  limit: z.string().optional(),
});

const Q_RE = /^[A-Za-z0-9_-]{0,64}$/;
export const MAX_PER_PAGE = 200;

function wholeNumber(name: string, value: string | undefined, fallback: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1 || n > max)
    throw badRequest(`${name}: expected a whole number from 1 to ${max}, got '${value.slice(0, 20)}'`);
  return n;
}

export function parseOverviewView(raw: unknown): OverviewView {
  const parsed = viewQuery.safeParse(raw ?? {});
  if (!parsed.success) throw badRequest('query: expected q, state, page and limit as text');
  const { q: rawQ, state: rawState, page, limit } = parsed.data;
  const q = (rawQ ?? '').trim();
  if (!Q_RE.test(q)) {
    throw badRequest(
      `q: expected part of an organization key (up to 64 letters, digits, _ or -), got '${q.slice(0, 64)}'`,
    );
  }
  const state = rawState || DEFAULT_VIEW.state;
  if (!(STATE_FILTERS as readonly string[]).includes(state))
    throw badRequest(`state: expected one of ${STATE_FILTERS.join(', ')}, got '${state.slice(0, 40)}'`);
  return {
    q,
    state: state as StateFilter,
    page: wholeNumber('page', page, 1, Number.MAX_SAFE_INTEGER),
    perPage: wholeNumber('limit', limit, DEFAULT_VIEW.perPage, MAX_PER_PAGE),
  };
}

/** The query of a view, its defaults left out (for links and the live stream). */
export function viewParams(view: OverviewView): Record<string, string | number | undefined> {
  return {
    q: view.q || undefined,
    state: view.state === DEFAULT_VIEW.state ? undefined : view.state,
    page: view.page === 1 ? undefined : view.page,
    limit: view.perPage === DEFAULT_VIEW.perPage ? undefined : view.perPage,
  };
}

/** One string per view: listeners of the same view share its payload and frames. */
export function viewKey(view: OverviewView): string {
  return JSON.stringify([view.q, view.state, view.page, view.perPage]);
}

export function viewOfKey(key: string): OverviewView {
  const [q, state, page, perPage] = JSON.parse(key) as [string, StateFilter, number, number];
  return { q, state, page, perPage };
}
