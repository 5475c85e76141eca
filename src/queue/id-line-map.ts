// learner id -> first line number (and the organization's index), for a million-row CSV's duplicate
// check: open addressing over typed arrays, as a JS Map costs ~60 MB (docs/benchmarks.md); ids of 2^32
// and more sit in a small Map.

const MAX_LOAD = 0.75;

export class IdLineMap {
  #keys: Uint32Array;
  #lines: Uint32Array;
  /** Allocated at the first tag other than 0. */
  #tags: Uint16Array | undefined;
  /** Ids of 2^32 and more: [line, tag]. */
  readonly #big = new Map<number, [number, number]>();
  #size = 0;

  constructor(initialCapacity = 1024) {
    let cap = 16;
    while (cap * MAX_LOAD < initialCapacity) cap = Math.ceil(cap * 1.5);
    this.#keys = new Uint32Array(cap);
    this.#lines = new Uint32Array(cap);
  }

  get size(): number {
    return this.#size + this.#big.size;
  }

  /** Ids are positive; 0 marks an empty slot. */
  #slot(keys: Uint32Array, id: number): number {
    const cap = keys.length;
    let h = Math.imul(id, 0x9e3779b1);
    h ^= h >>> 16;
    let i = (h >>> 0) % cap;
    while (keys[i] !== 0 && keys[i] !== id) if (++i === cap) i = 0;
    return i;
  }

  get(id: number): number | undefined {
    if (id > 0xffffffff) return this.#big.get(id)?.[0];
    const i = this.#slot(this.#keys, id);
    return this.#keys[i] === id ? this.#lines[i] : undefined;
  }

  /** The tag set with the id (0 when none was), or undefined for an id not in the map. */
  tagOf(id: number): number | undefined {
    if (id > 0xffffffff) return this.#big.get(id)?.[1];
    const i = this.#slot(this.#keys, id);
    if (this.#keys[i] !== id) return undefined;
    return this.#tags ? this.#tags[i] : 0;
  }

  set(id: number, line: number, tag = 0): void {
    if (!Number.isSafeInteger(id) || id < 1)
      throw new RangeError(`learner id ${id} is not a positive safe integer`);
    if (!Number.isInteger(tag) || tag < 0 || tag > 0xffff) throw new RangeError(`tag ${tag} is not 0..65535`);
    if (id > 0xffffffff) {
      this.#big.set(id, [line, tag]);
      return;
    }
    if (this.#size + 1 > this.#keys.length * MAX_LOAD) this.#grow();
    const i = this.#slot(this.#keys, id);
    if (this.#keys[i] !== id) this.#size++;
    this.#keys[i] = id;
    this.#lines[i] = line;
    if (tag !== 0) this.#tags ??= new Uint16Array(this.#keys.length);
    if (this.#tags) this.#tags[i] = tag;
  }

  #grow(): void {
    const oldKeys = this.#keys;
    const oldLines = this.#lines;
    const oldTags = this.#tags;
    const cap = Math.ceil(oldKeys.length * 1.5);
    this.#keys = new Uint32Array(cap);
    this.#lines = new Uint32Array(cap);
    this.#tags = oldTags ? new Uint16Array(cap) : undefined;
    for (let j = 0; j < oldKeys.length; j++) {
      const id = oldKeys[j] as number;
      if (id === 0) continue;
      const i = this.#slot(this.#keys, id);
      this.#keys[i] = id;
      this.#lines[i] = oldLines[j] as number;
      if (this.#tags && oldTags) this.#tags[i] = oldTags[j] as number;
    }
  }
}
