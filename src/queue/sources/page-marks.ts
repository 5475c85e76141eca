// What the page walker remembers of the pages it read, in a size that does not grow with them: whether
// each read arrived before the list's last change of total (a suspect) or not, as two sets of page
// ranges, with that total and the change's arrival number.

/** Sorted, disjoint, non-adjacent ranges of page numbers [from, to]. */
export class PageRanges {
  #r: Array<[number, number]> = [];

  copy(): PageRanges {
    const set = new PageRanges();
    set.#r = this.#r.map(([from, to]) => [from, to]);
    return set;
  }

  get ranges(): ReadonlyArray<readonly [number, number]> {
    return this.#r;
  }

  has(page: number): boolean {
    return this.#r.some(([from, to]) => page >= from && page <= to);
  }

  add(page: number): void {
    const r = this.#r;
    const last = r[r.length - 1];
    // Pass 1 adds pages in order: extend the last range in O(1).
    if (last && page === last[1] + 1) {
      last[1] = page;
      return;
    }
    if (this.has(page)) return;
    let i = r.findIndex(([from]) => from > page);
    if (i < 0) i = r.length;
    const before = r[i - 1];
    const after = r[i];
    if (before && before[1] === page - 1 && after && after[0] === page + 1) {
      before[1] = after[1];
      r.splice(i, 1);
    } else if (before && before[1] === page - 1) before[1] = page;
    else if (after && after[0] === page + 1) after[0] = page;
    else r.splice(i, 0, [page, page]);
  }

  delete(page: number): void {
    const r = this.#r;
    const i = r.findIndex(([from, to]) => page >= from && page <= to);
    const range = r[i];
    if (!range) return;
    const [from, to] = range;
    if (from === to) r.splice(i, 1);
    else if (page === from) range[0] = page + 1;
    else if (page === to) range[1] = page - 1;
    else r.splice(i, 1, [from, page - 1], [page + 1, to]);
  }

  clear(): void {
    this.#r = [];
  }

  /** "1-400,402,405-410" ("" when empty). */
  toString(): string {
    return this.#r.map(([from, to]) => (from === to ? `${from}` : `${from}-${to}`)).join(',');
  }

  /** The form toString writes; undefined when the text is not it. */
  static parse(text: string): PageRanges | undefined {
    const set = new PageRanges();
    if (text === '') return set;
    let end = 0;
    for (const part of text.split(',')) {
      const m = /^(\d+)(?:-(\d+))?$/.exec(part);
      if (!m) return undefined;
      const from = Number(m[1]);
      const to = m[2] === undefined ? from : Number(m[2]);
      if (!Number.isSafeInteger(to) || from < 1 || to < from || from <= end) return undefined;
      // Appended as ranges, not page by page: a range is one entry whatever its length.
      const last = set.#r[set.#r.length - 1];
      if (last && last[1] === from - 1) last[1] = to;
      else set.#r.push([from, to]);
      end = to;
    }
    return set;
  }
}

/** The walker's memory of the pages read (see the top of this file). */
export interface WalkMarks {
  /** Total of the latest response, in arrival order (null before any). */
  lastTotal: number | null;
  /** Arrival number of the last response whose total differed from the one before it (0: none yet). */
  lastChange: number;
  /** The last arrival number used (a resume continues after it). */
  seq: number;
  /** Pages read (a read handled). */
  read: PageRanges;
  /** Pages of `read` whose latest read arrived at or after lastChange: not suspect. */
  fresh: PageRanges;
}

export function emptyMarks(seq = 0): WalkMarks {
  return { lastTotal: null, lastChange: 0, seq, read: new PageRanges(), fresh: new PageRanges() };
}

/** "t=<total|->;c=<lastChange>;s=<seq>;r=<ranges>;f=<ranges>", the cursor's `marks` field. */
export function encodeMarks(m: WalkMarks): string {
  return `t=${m.lastTotal ?? '-'};c=${m.lastChange};s=${m.seq};r=${m.read.toString()};f=${m.fresh.toString()}`;
}

export function decodeMarks(text: string): WalkMarks | undefined {
  const m = /^t=(\d+|-);c=(\d+);s=(\d+);r=([\d,-]*);f=([\d,-]*)$/.exec(text);
  if (!m || m[1] === undefined || m[4] === undefined || m[5] === undefined) return undefined;
  const read = PageRanges.parse(m[4]);
  const fresh = PageRanges.parse(m[5]);
  if (!read || !fresh) return undefined;
  return {
    lastTotal: m[1] === '-' ? null : Number(m[1]),
    lastChange: Number(m[2]),
    seq: Number(m[3]),
    read,
    fresh,
  };
}

/**
 * Marks from the per-page form an earlier release kept (page -> its latest read's total and arrival
 * number), so a crawl it started resumes with its change detection intact.
 */
export function marksFromPages(pages: ReadonlyMap<number, { total: number; seq: number }>): WalkMarks {
  const reads = [...pages].sort((a, b) => a[1].seq - b[1].seq);
  const marks = emptyMarks();
  for (const [page, { total, seq }] of reads) {
    if (marks.lastTotal !== null && total !== marks.lastTotal) marks.lastChange = seq;
    marks.lastTotal = total;
    if (seq > marks.seq) marks.seq = seq;
    marks.read.add(page);
  }
  for (const [page, { seq }] of reads) if (seq >= marks.lastChange) marks.fresh.add(page);
  return marks;
}

/** Read pages up to `lastPage` that are not fresh: they may be stale. */
export function suspectPages(m: WalkMarks, lastPage: number): number[] {
  if (m.lastChange === 0) return [];
  const out: number[] = [];
  for (const [from, to] of m.read.ranges) {
    for (let p = from; p <= Math.min(to, lastPage); p++) if (!m.fresh.has(p)) out.push(p);
  }
  return out;
}
