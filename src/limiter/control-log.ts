// The change log: every change made through the live controls (limits, pause and resume, urgent
// learners), who made it and when, appended to one Redis stream (keys.changes()). Append-only: nothing
// here edits or trims it. Who: the CLI's user and host, or the dashboard's user and client address.
import { hostname, userInfo } from 'node:os';
import type { Keys } from '../core/keys.ts';
import type { RedisClient } from '../redis/client.ts';

export interface ChangeEntry {
  /** Stream id (time-ordered). */
  id: string;
  /** ISO time of the change. */
  at: string;
  /** `cli:user@host` or `dashboard:user@address`. */
  who: string;
  /** What was done: `limits.set`, `limits.reset`, `pause`, `resume`, `priority.urgent`, ... */
  action: string;
  org: string | null;
  tokenId: string | null;
  /** What changed (before/after values, the learner...): never a secret. */
  details: Record<string, unknown>;
}

export type NewChange = Omit<ChangeEntry, 'id' | 'at'>;

/** The CLI's author: the OS user and the host it runs on. */
export function cliActor(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container's numeric uid): keep 'unknown'.
  }
  return `cli:${user}@${hostname()}`;
}

/** The dashboard's author: the basic-auth user name when one was given, and the client's address. */
export function dashboardActor(user: string | undefined, address: string): string {
  return `dashboard:${user && user.length > 0 ? user : 'token'}@${address}`;
}

/** Appends one change; returns its stream id. */
export async function appendChange(redis: RedisClient, keys: Keys, change: NewChange): Promise<string> {
  const id = await redis.xadd(
    keys.changes(),
    '*',
    'at',
    new Date().toISOString(),
    'who',
    change.who,
    'action',
    change.action,
    'org',
    change.org ?? '',
    'token',
    change.tokenId ?? '',
    'details',
    JSON.stringify(change.details),
  );
  return String(id);
}

/** The newest `count` changes, newest first (optionally of one organization). */
export async function readChanges(
  redis: RedisClient,
  keys: Keys,
  options: { count?: number; org?: string } = {},
): Promise<ChangeEntry[]> {
  const count = options.count ?? 50;
  const out: ChangeEntry[] = [];
  let end = '+';
  // Filtering by organization reads further back in batches until `count` are found or the log ends.
  for (;;) {
    const batch = await redis.xrevrange(keys.changes(), end, '-', 'COUNT', Math.max(count, 100));
    for (const [id, flat] of batch) {
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i] as string] = flat[i + 1] as string;
      if (options.org && f.org !== options.org) continue;
      let details: Record<string, unknown> = {};
      try {
        details = JSON.parse(f.details ?? '{}') as Record<string, unknown>;
      } catch {
        details = {};
      }
      out.push({
        id,
        at: f.at ?? '',
        who: f.who ?? '',
        action: f.action ?? '',
        org: f.org ? f.org : null,
        tokenId: f.token ? f.token : null,
        details,
      });
      if (out.length >= count) return out;
    }
    if (batch.length === 0) return out;
    const last = batch.at(-1)?.[0] as string;
    // The next page ends just before the last id read (exclusive range).
    end = `(${last}`;
    if (batch.length < Math.max(count, 100)) return out;
  }
}
