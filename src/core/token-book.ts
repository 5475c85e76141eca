// The live set of this process's tokens. It starts as the config's and changes when `work` reads the token
// file again (app/token-reload.ts); whoever picks a token, scrubs secrets or serves organizations asks it
// at the time, or listens to its changes, instead of keeping a copy made at start.
import type { TokenRef } from './token-ref.ts';

/** What one replace changed. A token is its organization and its id: a token moved to another org is both. */
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
  /** Secrets removed since start: still scrubbed, as a call in flight or a late log line may hold them. */
  readonly #retired = new Set<string>();
  readonly #listeners = new Set<TokenListener>();
  readonly #onListenerError: ((err: unknown) => void) | undefined;
  #version = 0;

  /**
   * `onListenerError` hears a listener's failure (the others are told all the same); without it, replace
   * throws the first failure once every listener was told.
   */
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

  /** The tokens by organization: one map per version, so a caller may keep it until the next change. */
  byOrg(): ReadonlyMap<string, readonly TokenRef[]> {
    return this.#byOrg;
  }

  /** Organization keys with a token, in the order they first appear. */
  orgs(): readonly string[] {
    return this.#orgs;
  }

  /**
   * Every secret this process has held since it started, the removed ones too: a call sent with a
   * rotated token may still answer with it, and what it answers must be scrubbed. One array per version.
   */
  secrets(): readonly string[] {
    return this.#secrets;
  }

  /** Makes `next` the tokens in force; returns what changed and tells the listeners (not when nothing did). */
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
