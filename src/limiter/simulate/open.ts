// The run window in the simulation: when it is open (asked in increasing time), and open time
// over a span.

/** The run window, asked in increasing time (one interval cached). */
export class RunWindow {
  private s = 0;
  private e = -Infinity;
  private asked = Infinity;
  private closedForGood = false;

  constructor(
    private readonly open: (t: number) => readonly [number, number] | null,
    readonly periodMs: number,
    readonly fromMs: number,
  ) {}

  /** c when open at c, else when it opens next; Infinity: never again. */
  at(c: number): number {
    if (c >= this.e || c < this.asked) {
      const iv = this.open(c);
      this.asked = c;
      this.closedForGood = !iv || !(iv[1] > c) || !(iv[1] > iv[0]);
      if (iv) [this.s, this.e] = iv;
    }
    if (this.closedForGood) return Infinity;
    return c >= this.s ? c : this.s;
  }

  /** The interval of the last answer. */
  get start(): number {
    return this.s;
  }
  get end(): number {
    return this.e;
  }

  /** Open time in [a, b) (walked interval by interval, whole periods at once when they repeat). */
  openTime(a: number, b: number): number {
    const p = this.periodMs;
    if (p > 0 && b - Math.max(a, this.fromMs) > 3 * p) {
      const from = Math.max(a, this.fromMs);
      const periods = Math.floor((b - from) / p) - 1;
      return this.walk(a, from) + periods * this.walk(from, from + p) + this.walk(from + periods * p, b);
    }
    return this.walk(a, b);
  }

  private walk(a: number, b: number): number {
    let total = 0;
    for (let x = a, i = 0; x < b; i++) {
      const s = this.at(x);
      if (s >= b) break;
      const e = Math.min(this.e, b);
      total += e - s;
      x = this.e;
      if (i > 100_000) return total + ((b - x) * total) / (x - a);
    }
    return total;
  }

  /** When `need` ms of open time after x have passed; Infinity: never. */
  after(x: number, need: number): number {
    const p = this.periodMs;
    if (p > 0 && x >= this.fromMs) {
      const per = this.walk(x, x + p);
      if (per <= 0) return Infinity;
      const periods = Math.floor(need / per) - 1;
      if (periods > 0) {
        x += periods * p;
        need -= periods * per;
      }
    }
    for (let i = 0; i < 1_000_000; i++) {
      const s = this.at(x);
      if (s === Infinity) return Infinity;
      if (this.e - s >= need) return s + need;
      need -= this.e - s;
      x = this.e;
    }
    return Infinity;
  }
}
