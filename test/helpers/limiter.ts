// Narrowing a limiter answer in tests: the permit a test expects, or the refusal it expects, and a loud
// failure that shows the other answer when it is not.
import type { Acquired, Refused } from '../../src/limiter/index.ts';

export function granted(r: Acquired | Refused): Acquired {
  if (!r.ok) throw new Error(`expected a permit, got a refusal: ${JSON.stringify(r)}`);
  return r;
}

export function refused(r: Acquired | Refused): Refused {
  if (r.ok) throw new Error(`expected a refusal, got a permit on ${r.tokenId}`);
  return r;
}
