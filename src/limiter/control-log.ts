// The change log: every change made through the live controls and every token file change
// `work` applied, who and when, in one append-only Redis stream (keys.changes()).
import { hostname, userInfo } from 'node:os';
import type { Keys } from '../core/keys.ts';
import type { RedisClient } from '../redis/client.ts';

export interface ChangeEntry {
  /** Stream id (time-ordered). */
  id: string;
  /** ISO time of the change. */
  at: string;
  /** `cli:user@host`, `dashboard:operator[/user]@address` or `work:user@host:pid`. */
  who: string;
  /**
   * What was done: `limits.set`, `limits.reset`, `pause`, `resume`, `tokens.reload`, `retry`,
   * ...
   */
  action: string;
  org: string | null;
  tokenId: string | null;
  /** What changed (before/after values, the learner...): never a secret. */
  details: Record<string, unknown>;
}

export type NewChange = Omit<ChangeEntry, 'id' | 'at'>;

/** The CLI's author: the OS user and the host it runs on. */
export function cliActor(): string {
  return `cli:${osUser()}@${hostname()}`;
}

/**
 * A `work` process that changed something on its own (a token file's reload), by user, host and
 * pid.
 */
export function workActor(): string {
  return `work:${osUser()}@${hostname()}:${process.pid}`;
}

function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown'; // no passwd entry (a container's numeric uid)
  }
}

/**
 * The dashboard's author: the credential's id (`operator`, or `local` without a token), the
 * basic-auth user name when given (unchecked), and the client's address:
 * `dashboard:operator/alice@10.0.0.7`. Never the token.
 */
export function dashboardActor(user: string | undefined, address: string, tokenId = 'operator'): string {
  const named = user && user.length > 0 && user !== tokenId ? `/${user}` : '';
  return `dashboard:${tokenId}${named}@${address}`;
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

export interface ChangeFilter {
  count?: number;
  /** Only this organization's changes. */
  org?: string;
  /** Only this action (`retry`), or every action under a prefix ending in a dot (`limits.`). */
  action?: string;
  /** Only changes whose author contains this text (any case): `alice`, `dashboard:`, `@10.0.0.7`. */
  who?: string;
  /** Only changes older than this stream id (the next page of a list). */
  before?: string;
}

function matches(f: Record<string, string>, options: ChangeFilter): boolean {
  if (options.org && f.org !== options.org) return false;
  const action = f.action ?? '';
  if (options.action) {
    const prefix = options.action.endsWith('.');
    if (prefix ? !action.startsWith(options.action) : action !== options.action) return false;
  }
  if (options.who && !(f.who ?? '').toLowerCase().includes(options.who.toLowerCase())) return false;
  return true;
}

/** The newest `count` changes, newest first (optionally of one organization, action or author). */
export async function readChanges(
  redis: RedisClient,
  keys: Keys,
  options: ChangeFilter = {},
): Promise<ChangeEntry[]> {
  const count = options.count ?? 50;
  const out: ChangeEntry[] = [];
  let end = options.before ? `(${options.before}` : '+';
  // Filtering reads further back in batches until `count` are found or the log ends.
  for (;;) {
    const batch = await redis.xrevrange(keys.changes(), end, '-', 'COUNT', Math.max(count, 100));
    for (const [id, flat] of batch) {
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i] as string] = flat[i + 1] as string;
      if (!matches(f, options)) continue;
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
