// learner id -> first line number, for the in-file duplicate check of a million-row CSV. A JS Map of a
// million entries costs ~60 MB of small objects and makes V8 grow the heap far past that; this is
// open addressing over two typed arrays: 12 bytes a slot, at most half full.

export class IdLineMap {
  #keys: Float64Array;
  #lines: Uint32Array;
  #size = 0;

  constructor(initialCapacity = 1024) {
    let cap = 16;
    while (cap < initialCapacity * 2) cap *= 2;
    this.#keys = new Float64Array(cap);
    this.#lines = new Uint32Array(cap);
  }

  get size(): number {
    return this.#size;
  }

  /** Ids are positive safe integers; 0 marks an empty slot. */
  #slot(keys: Float64Array, id: number): number {
    const mask = keys.length - 1;
    // Mix the high and low 32 bits (ids go up to 2^53).
    let h = Math.imul((id % 4294967296) ^ Math.floor(id / 4294967296), 0x9e3779b1);
    h ^= h >>> 16;
    let i = h & mask;
    while (keys[i] !== 0 && keys[i] !== id) i = (i + 1) & mask;
    return i;
  }

  get(id: number): number | undefined {
    const i = this.#slot(this.#keys, id);
    return this.#keys[i] === id ? this.#lines[i] : undefined;
  }

  set(id: number, line: number): void {
    if (!Number.isSafeInteger(id) || id < 1)
      throw new RangeError(`learner id ${id} is not a positive safe integer`);
    if ((this.#size + 1) * 2 > this.#keys.length) this.#grow();
    const i = this.#slot(this.#keys, id);
    if (this.#keys[i] !== id) this.#size++;
    this.#keys[i] = id;
    this.#lines[i] = line;
  }

  #grow(): void {
    const oldKeys = this.#keys;
    const oldLines = this.#lines;
    this.#keys = new Float64Array(oldKeys.length * 2);
    this.#lines = new Uint32Array(oldKeys.length * 2);
    for (let j = 0; j < oldKeys.length; j++) {
      const id = oldKeys[j] as number;
      if (id === 0) continue;
      const i = this.#slot(this.#keys, id);
      this.#keys[i] = id;
      this.#lines[i] = oldLines[j] as number;
    }
  }
}
