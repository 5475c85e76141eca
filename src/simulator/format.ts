// Date formats exactly as the spec shows them. All in UTC.

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/** YYYY-MM-DD */
export function formatDate(ms: number): string {
  const d = new Date(ms);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
}

/** YYYY-MM-DD HH:MM:SS (the learner's createdAt / updatedAt). */
export function formatDateTime(ms: number): string {
  const d = new Date(ms);
  return `${formatDate(ms)} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

/**
 * ISO 8601 UTC with six fractional digits (2026-11-22T01:02:03.123456Z), as the spec shows for
 * initiatedAt and authorizedAt. `micros` is the sub-millisecond part, 0..999.
 */
export function formatMicroIso(ms: number, micros: number): string {
  const iso = new Date(ms).toISOString(); // 2026-11-22T01:02:03.123Z
  return `${iso.slice(0, -1)}${pad(Math.floor(micros) % 1000, 3)}Z`;
}
