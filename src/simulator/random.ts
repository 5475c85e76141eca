// A small seeded PRNG (mulberry32): the same seed gives the same learners and faults, so a
// failing test can be replayed. Separate streams keep the data independent of the faults.
import { LearnerTransferError } from '../core/errors.ts';

export interface Random {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [min, max], both included. */
  int(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
  /** True with probability p. */
  chance(p: number): boolean;
  /** `length` lowercase hex digits. */
  hex(length: number): string;
}

export function createRandom(seed: number): Random {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (min: number, max: number): number => min + Math.floor(next() * (max - min + 1));
  return {
    next,
    int,
    pick<T>(items: readonly T[]): T {
      const item = items[Math.floor(next() * items.length)];
      if (item === undefined) throw new LearnerTransferError('LT_INTERNAL', 'pick from an empty list');
      return item;
    },
    chance: (p) => next() < p,
    hex(length) {
      let out = '';
      while (out.length < length)
        out += Math.floor(next() * 0x10000)
          .toString(16)
          .padStart(4, '0');
      return out.slice(0, length);
    },
  };
}

/** A random stream from the seed and a name, so adding a stream does not shift the others. */
export function stream(seed: number, name: string): Random {
  let h = 2166136261 ^ seed;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  return createRandom(h >>> 0);
}

/** Uniform in [min, max] milliseconds; 0 when no range is given. */
export function between(random: Random, range: readonly [number, number] | undefined): number {
  if (!range) return 0;
  const [min, max] = range;
  return min + random.next() * (max - min);
}
