// What the page walker checks of each page before it believes it (docs/crawl.md): a failed check stops
// the walk with an error naming the claim.
import type { ListPage } from '../../api/schemas.ts';
import { DEFAULT_CRAWL_MAX_PAGES } from '../../core/config.ts';
import { LearnerTransferError } from '../../core/errors.ts';

/**
 * The page the service answered must be the page asked for. The spec: page N covers positions
 * (N-1)*per_page+1 to N*per_page, and current_page is the page requested. A service that ignores
 * ?page= answers page 1 every time: the same learners again, never the rest. Retrying does not
 * help; the walk stops with what came back. `from`/`to` are checked when given (the schema accepts
 * them absent or null, as on an empty page).
 */
export function checkPageAnswered(page: number, body: ListPage): void {
  const p = body.pagination;
  const count = body.data.length;
  const problems: string[] = [];
  if (p.current_page !== page) problems.push(`current_page ${p.current_page}`);
  if (count > p.per_page) problems.push(`${count} learners for per_page ${p.per_page}`);
  if (count > 0) {
    const first = (page - 1) * p.per_page + 1;
    const last = page * p.per_page;
    if (p.from !== null && p.from !== undefined && p.from !== first) {
      problems.push(`from ${p.from} where page ${page} starts at ${first}`);
    }
    if (p.to !== null && p.to !== undefined && (p.to < first || p.to > last)) {
      problems.push(`to ${p.to} outside ${first}..${last}`);
    }
  }
  if (problems.length === 0) return;
  throw new LearnerTransferError(
    'LT_INPUT_UNREADABLE',
    `listing learners: asked for page ${page}, the service answered ${problems.join(', ')} ` +
      `(current_page ${p.current_page}, from ${p.from ?? 'none'}, to ${p.to ?? 'none'}, per_page ${p.per_page}, ` +
      `${count} learners): it does not page as the spec says, so the walk stops rather than read the same ` +
      `learners again or miss the rest; check LEARNER_API_BASE_URL and any proxy in front of the service`,
  );
}

/**
 * What a page claims about the whole list must hold together (the table of docs/crawl.md): a service
 * once claimed a billion empty pages. Retrying does not help; the walk stops with the claim.
 */
export function checkPageClaims(page: number, body: ListPage, maxPages = DEFAULT_CRAWL_MAX_PAGES): void {
  const p = body.pagination;
  const count = body.data.length;
  const claim = `(total ${p.total}, per_page ${p.per_page}, last_page ${p.last_page})`;
  const fail = (what: string, why: string) =>
    new LearnerTransferError(
      'LT_INPUT_UNREADABLE',
      `listing learners, page ${page}: ${what} ${claim}: ${why}`,
    );
  const stop = 'so the walk stops rather than ask for pages the service cannot have';
  if (p.per_page < 1) throw fail(`the service claims per_page ${p.per_page}`, stop);
  const pages = Math.max(1, Math.ceil(p.total / p.per_page));
  if (p.last_page !== pages && !(p.total === 0 && p.last_page === 0)) {
    throw fail(
      `the service claims last_page ${p.last_page}, where total / per_page makes ${pages} page${pages === 1 ? '' : 's'}`,
      stop,
    );
  }
  if (count === 0 && (page - 1) * p.per_page < p.total) {
    throw fail(
      `the page is empty, but the service claims ${p.total} learners, ${(page - 1) * p.per_page + 1} and on from this page`,
      `so the walk stops here rather than ask for the ${pages - page} page${pages - page === 1 ? '' : 's'} after it`,
    );
  }
  if (pages > maxPages) {
    throw fail(
      `the service claims ${pages} pages, more than CRAWL_MAX_PAGES (${maxPages})`,
      'raise CRAWL_MAX_PAGES if the list really is that long',
    );
  }
}
