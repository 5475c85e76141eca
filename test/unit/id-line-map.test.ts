import { describe, expect, it } from 'vitest';
import { IdLineMap } from '../../src/queue/id-line-map.ts';

describe('IdLineMap', () => {
  it('keeps the first line of every id through growth, like a Map', () => {
    const m = new IdLineMap(4);
    const ref = new Map<number, number>();
    let seed = 7;
    const rand = () => (seed = (seed * 48271) % 2147483647);
    for (let line = 1; line <= 50_000; line++) {
      // Small ids collide often; large ones exercise the high bits up to 2^53 - 1.
      const id = line % 3 === 0 ? Number.MAX_SAFE_INTEGER - (rand() % 1000) : (rand() % 20_000) + 1;
      if (!ref.has(id)) ref.set(id, line);
      if (m.get(id) === undefined) m.set(id, line);
    }
    expect(m.size).toBe(ref.size);
    for (const [id, line] of ref) expect(m.get(id)).toBe(line);
    expect(m.get(20_001)).toBeUndefined();
  });

  it('keeps a tag (the organization index) with each id through growth, ids of 2^32 and more too', () => {
    const m = new IdLineMap(4);
    for (let id = 1; id <= 5_000; id++) m.set(id * 7919, id, id % 3 === 0 ? 0 : id % 300);
    m.set(2 ** 40, 9, 12);
    expect(m.size).toBe(5_001);
    for (let id = 1; id <= 5_000; id++) {
      expect(m.get(id * 7919)).toBe(id);
      expect(m.tagOf(id * 7919)).toBe(id % 3 === 0 ? 0 : id % 300);
    }
    expect([m.get(2 ** 40), m.tagOf(2 ** 40)]).toEqual([9, 12]);
    expect(m.tagOf(5)).toBeUndefined();
    expect(() => m.set(1, 1, 70_000)).toThrow(RangeError);
  });

  it('refuses ids it cannot hold', () => {
    const m = new IdLineMap();
    expect(() => m.set(0, 1)).toThrow(RangeError);
    expect(() => m.set(2 ** 53, 1)).toThrow(RangeError);
  });
});
