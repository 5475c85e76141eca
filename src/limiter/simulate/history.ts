// The batches the simulation granted, one row per batch (columns below): what a leap reads back.
import { ETA_BOUNDS } from '../kinds.ts';

/**
 * A history buffer kept between calls (simulate runs synchronously; a nested call makes its
 * own).
 */
let idleRows: Float64Array | undefined;

/** The waits the simulation books: one per ETA bound, in ETA_BOUNDS's order. */
export const WAIT_COUNT = ETA_BOUNDS.length;

/**
 * Columns of a History row; then per token its take and total, per scope its window's count,
 * bucket rel and reset.
 */
export const TIME = 0;
export const SIZE = 1;
export const LEFT = 2;
/** The open interval that held the batch. */
export const OPEN_START = 3;
export const OPEN_END = 4;
/**
 * After a leap of COUNT periods of PERIOD repeating rows (ANCHOR, this row - 1], what it
 * loosened.
 */
export const ANCHOR = 5;
export const PERIOD = 6;
export const COUNT = 7;
export const LOOSENED = 8;
/** The clauses of the row's decisions (its leap's, after one) in History.clauses [from, to). */
export const CLAUSES_FROM = 9;
export const CLAUSES_TO = 10;
/** The waits so far, one per ETA bound (WAIT_COUNT). */
export const WAITS = 11;
export const COLUMNS = WAITS + WAIT_COUNT;

/**
 * The batches granted, one row per batch with the state after it. A leap's batches are not
 * rows: the row after it names the rows they repeated, and holds what is read through them.
 */
export class History {
  rows: Float64Array;
  size = 0;
  /** The last row that follows a leap. */
  lastGap = -1;
  readonly width: number;
  readonly totalsAt: number;
  readonly countsAt: number;
  readonly relsAt: number;
  readonly resetsAt: number;
  readonly clauses: number[] = [];

  /** `orgScopes`: how many scopes every grant counts in (the organization's), before the tokens. */
  constructor(
    readonly tokens: number,
    readonly orgScopes: number,
  ) {
    const scopes = orgScopes + tokens;
    this.width = COLUMNS + 2 * tokens + 3 * scopes;
    this.totalsAt = COLUMNS + tokens;
    this.countsAt = COLUMNS + 2 * tokens;
    this.relsAt = this.countsAt + scopes;
    this.resetsAt = this.relsAt + scopes;
    this.rows = idleRows ?? new Float64Array(64 * this.width);
    idleRows = undefined;
  }

  /** Hands the buffer on to the next call. */
  done(): void {
    if (!idleRows || idleRows.length < this.rows.length) idleRows = this.rows;
  }

  /** A new row; returns where it starts. */
  add(): number {
    const at = this.size * this.width;
    if (at + this.width > this.rows.length) {
      const rows = new Float64Array(this.rows.length * 2);
      rows.set(this.rows);
      this.rows = rows;
    }
    this.size++;
    return at;
  }

  get(row: number, column: number): number {
    return this.rows[row * this.width + column] ?? 0;
  }
  time(row: number): number {
    return this.rows[row * this.width + TIME] ?? 0;
  }
  left(row: number): number {
    return this.rows[row * this.width + LEFT] ?? 0;
  }
  /** Whether a leap comes just before the row. */
  leapt(row: number): boolean {
    return (this.rows[row * this.width + ANCHOR] ?? -1) >= 0;
  }
  take(row: number, token: number): number {
    return this.rows[row * this.width + COLUMNS + token] ?? 0;
  }
  /** What scope s took in the batch: all of it for an organization's scope. */
  took(row: number, s: number): number {
    return s < this.orgScopes ? this.get(row, SIZE) : this.take(row, s - this.orgScopes);
  }

  /**
   * Batches i and j look alike: the same size and spread, after the same time since the row
   * before, or after the same leap.
   */
  alike(i: number, j: number): boolean {
    if (j < 1 || this.leapt(i) !== this.leapt(j) || !this.same(i, j)) return false;
    if (!this.leapt(i)) return this.time(i) - this.time(i - 1) === this.time(j) - this.time(j - 1);
    const a = i * this.width;
    const b = j * this.width;
    const rows = this.rows;
    return (
      rows[a + PERIOD] === rows[b + PERIOD] &&
      rows[a + COUNT] === rows[b + COUNT] &&
      i - (rows[a + ANCHOR] ?? 0) === j - (rows[b + ANCHOR] ?? 0)
    );
  }

  /** Batches i and j are the same size and spread alike. */
  same(i: number, j: number): boolean {
    if (this.get(i, SIZE) !== this.get(j, SIZE)) return false;
    for (let k = 0; k < this.tokens; k++) if (this.take(i, k) !== this.take(j, k)) return false;
    return true;
  }

  /**
   * Every decision of the batches after row j up to row i (leapt ones included) keeps a
   * constraint as tight as it outside `loosened`, so loosening those changes none.
   */
  holds(j: number, i: number, loosened: number): boolean {
    const to = this.get(i, CLAUSES_TO);
    for (let c = this.get(j, CLAUSES_TO); c < to; c++)
      if (((this.clauses[c] ?? 0) & ~loosened) === 0) return false;
    return true;
  }

  /** The clauses of a leap repeating rows (j, i]: theirs less what it loosened, once each. */
  leapClauses(j: number, i: number, loosened: number): void {
    const from = this.clauses.length;
    const to = this.get(i, CLAUSES_TO);
    for (let c = this.get(j, CLAUSES_TO); c < to; c++) {
      const clause = (this.clauses[c] ?? 0) & ~loosened;
      let seen = false;
      for (let d = from; d < this.clauses.length && !seen; d++) seen = this.clauses[d] === clause;
      if (!seen) this.clauses.push(clause);
    }
  }

  /** The permits scope s took from the batches after row j up to row i, the leapt ones included. */
  grants(s: number, j: number, i: number): number {
    if (s < this.orgScopes) return this.left(j) - this.left(i);
    const column = this.totalsAt + s - this.orgScopes;
    return this.get(i, column) - this.get(j, column);
  }

  /**
   * A bucket's tat (interval T) after scope s's grants of the batches after row j up to row i,
   * from tat x: a grant of n at y sets tat = max(tat, y) + n T. Over m periods p of grants
   * taking K T and leaving `reset` from empty, tat = max(x + m K T, reset + p + (m - 1) max(p,
   * K T)).
   */
  replay(s: number, j: number, i: number, x: number, interval: number): number {
    for (let q = j + 1; q <= i; q++) {
      if (this.leapt(q)) {
        const took = this.grants(s, this.get(q, ANCHOR), q - 1) * interval;
        if (took <= 0) continue;
        const p = this.get(q, PERIOD);
        const reset = this.get(q, this.resetsAt + s);
        x = Math.max(x + this.get(q, COUNT) * took, reset + p + (this.get(q, COUNT) - 1) * Math.max(p, took));
        continue;
      }
      const n = this.took(q, s);
      if (n > 0) x = Math.max(x, this.time(q)) + n * interval;
    }
    return x;
  }
}
