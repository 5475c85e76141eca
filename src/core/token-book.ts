// The live set of this process's tokens: the config's, then each reload of the token file
// (app/token-reload.ts). Ask it at the time or listen to it; never keep a copy.
import type { TokenRef } from './token-ref.ts';

/** What one replace changed; a token moved to another org is both removed and added. */
export interface TokenChange {
  added: readonly TokenRef[];
  removed: readonly TokenRef[];
  /** Organizations whose tokens changed (added, removed or rotated), in key order. */
  orgsChanged: readonly string[];
  /** Organizations that had no token before, and those left with none. */
  orgsAdded: readonly string[];
  orgsRemoved: readonly string[];
}

export type TokenListener = (change: TokenChange) => void;

const keyOf = (t: TokenRef) => `${t.org}\u0000${t.id}`;

export class TokenBook {
  #tokens: readonly TokenRef[] = [];
  #byOrg: ReadonlyMap<string, readonly TokenRef[]> = new Map();
  #orgs: readonly string[] = [];
  #secrets: readonly string[] = [];
  /** Secrets removed since start: still scrubbed (a call in flight may hold them). */
  readonly #retired = new Set<string>();
  readonly #listeners = new Set<TokenListener>();
  readonly #onListenerError: ((err: unknown) => void) | undefined;
  #version = 0;

  /** Hears a listener's failure; without it, replace throws the first once all were told. */
  constructor(tokens: readonly TokenRef[], options: { onListenerError?: (err: unknown) => void } = {}) {
    this.#onListenerError = options.onListenerError;
    this.#set(tokens);
  }

  /** Grows by one at each change: a cache of something derived from the book keys on it. */
  get version(): number {
    return this.#version;
  }

  all(): readonly TokenRef[] {
    return this.#tokens;
  }

  tokensOf(org: string): readonly TokenRef[] {
    return this.#byOrg.get(org) ?? [];
  }

  /** The tokens by organization: one map per version, kept until the next change. */
  byOrg(): ReadonlyMap<string, readonly TokenRef[]> {
    return this.#byOrg;
  }

  /** Organization keys with a token, in the order they first appear. */
  orgs(): readonly string[] {
    return this.#orgs;
  }

  /**
   * Every secret held since start, the removed ones too: a rotated token's call may still
   * answer.
   */
  secrets(): readonly string[] {
    return this.#secrets;
  }

  /** Makes `next` the tokens in force; returns what changed and tells the listeners. */
  replace(next: readonly TokenRef[]): TokenChange {
    const before = new Map(this.#tokens.map((t) => [keyOf(t), t]));
    const after = new Map(next.map((t) => [keyOf(t), t]));
    const added = [...after].filter(([k]) => !before.has(k)).map(([, t]) => t);
    const removed = [...before].filter(([k]) => !after.has(k)).map(([, t]) => t);
    const oldOrgs = new Set(this.#orgs);
    const newOrgs = new Set(next.map((t) => t.org));
    const change: TokenChange = {
      added,
      removed,
      orgsChanged: [...new Set([...added, ...removed].map((t) => t.org))].sort(),
      orgsAdded: [...newOrgs].filter((o) => !oldOrgs.has(o)).sort(),
      orgsRemoved: [...oldOrgs].filter((o) => !newOrgs.has(o)).sort(),
    };
    if (added.length === 0 && removed.length === 0) return change;
    for (const t of removed) this.#retired.add(t.secret);
    this.#set([...after.values()]);
    this.#version++;
    let failure: { err: unknown } | undefined;
    for (const listener of [...this.#listeners]) {
      try {
        listener(change);
      } catch (err) {
        // Every listener hears of the change, whatever another one does with it.
        if (this.#onListenerError) this.#onListenerError(err);
        else failure ??= { err };
      }
    }
    if (failure) throw failure.err;
    return change;
  }

  /** Calls `listener` after each change; returns a function that stops it. */
  onChange(listener: TokenListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #set(tokens: readonly TokenRef[]): void {
    const byOrg = new Map<string, TokenRef[]>();
    for (const t of tokens) byOrg.set(t.org, [...(byOrg.get(t.org) ?? []), t]);
    for (const list of byOrg.values()) Object.freeze(list);
    this.#tokens = Object.freeze([...tokens]);
    this.#byOrg = byOrg;
    this.#orgs = Object.freeze([...byOrg.keys()]);
    const current = tokens.map((t) => t.secret);
    const live = new Set(current);
    this.#secrets = Object.freeze([...current, ...[...this.#retired].filter((s) => !live.has(s))]);
  }
}
