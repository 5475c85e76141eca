// A simulated world of one source organization and many schools, for the many-organizations tests.
import type { SimOrg } from '../../src/simulator/types.ts';

export const orgKey = (i: number) => `o${String(i).padStart(3, '0')}`;

/** A source organization, then `n` schools: learner i starts in organizations[(i - 1) % (n + 1)]. */
export function world(n: number): SimOrg[] {
  return [
    { id: 1, key: 'src', name: 'Source' },
    ...Array.from({ length: n }, (_, i) => ({ id: i + 2, key: orgKey(i + 1), name: `School ${i + 1}` })),
  ];
}

/** `count` learners for the organization at `index` (1-based) that are not already its own. */
export function learnersFor(organizations: SimOrg[], index: number, count: number, stride: number): number[] {
  const ids: number[] = [];
  const org = organizations[index]?.key;
  for (let id = (index - 1) * stride + 2; ids.length < count; id++) {
    if (organizations[(id - 1) % organizations.length]?.key !== org) ids.push(id);
  }
  return ids;
}
