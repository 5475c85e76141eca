// The runner's --seeds argument: '1-200', '7', '3,9,12' (and mixes like '1-5,9') into seed numbers, in
// order, without repeats. Apart from run.ts so that a test can check it without starting a run.
export function parseSeeds(text: string): number[] {
  const seeds: number[] = [];
  for (const part of text.split(',')) {
    const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(part);
    if (!m) throw new Error(`--seeds: expected N, N-M or N,M,..., got '${text}'`);
    const from = Number(m[1]);
    const to = Number(m[2] ?? m[1]);
    if (to < from) throw new Error(`--seeds: a range must go up, got '${part.trim()}'`);
    for (let s = from; s <= to; s++) if (!seeds.includes(s)) seeds.push(s);
  }
  return seeds;
}
