// How one instant's permits are spread over the tokens, as acquire.lua grants them one at a time.

/**
 * Each permit to the usable token with the most window room left (first on a tie); usable while
 * its bucket allows (at most caps[i] more) and it has room. Water-fill: every usable token
 * comes down to a level L + 1 (or its cap), then the first ones at L + 1 take one more.
 */
export function fill(rooms: readonly number[], caps: readonly number[], n: number, takes: number[]): void {
  const k = rooms.length;
  if (k === 1) {
    takes[0] = n;
    return;
  }
  if (n === 1) {
    let best = -1;
    for (let i = 0; i < k; i++) {
      takes[i] = 0;
      const room = rooms[i] ?? 0;
      if (room > 0 && (caps[i] ?? 0) > 0 && (best < 0 || room > (rooms[best] ?? 0))) best = i;
    }
    takes[best] = 1;
    return;
  }
  let lo = 0;
  let hi = 0;
  for (let i = 0; i < k; i++) hi = Math.max(hi, rooms[i] ?? 0);
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    let sum = 0;
    for (let i = 0; i < k; i++) sum += down(rooms[i] ?? 0, caps[i] ?? 0, mid);
    if (sum >= n) lo = mid;
    else hi = mid;
  }
  let rest = n;
  for (let i = 0; i < k; i++) rest -= takes[i] = down(rooms[i] ?? 0, caps[i] ?? 0, lo + 1);
  for (let i = 0; i < k && rest > 0; i++) {
    if (down(rooms[i] ?? 0, caps[i] ?? 0, lo) > (takes[i] ?? 0)) {
      takes[i] = (takes[i] ?? 0) + 1;
      rest--;
    }
  }
}

/** What a token with `room` and a bucket allowing `cap` takes to come down to `level`. */
function down(room: number, cap: number, level: number): number {
  return Math.min(room, cap, Math.max(0, room - level));
}
