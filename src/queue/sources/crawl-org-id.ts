// The target organization's numeric id, learned from the list: a learner this tool moved there shows it
// as its organizationId (docs/crawl.md). A known id is checked the same way; a disagreement is reported.
import type { Learner } from '../../api/schemas.ts';
import { LearnerTransferError } from '../../core/errors.ts';
import { isSuccessBucket, type Bucket } from '../../outcomes/record.ts';
import type { OutcomeStore } from '../../outcomes/store.ts';
import type { OrgIds } from '../org-ids.ts';

/** Where the id a crawl starts with came from. */
export type OrgIdSource = 'given' | 'remembered';

/** What the watch found, once (the crawl command logs it). */
export type OrgIdEvent =
  /** Learned from the list and remembered (not remembered in a dry run). */
  | { kind: 'learned'; org: string; id: number; learnerId: number; remembered: boolean }
  /** The list agrees with the id the crawl started with. */
  | { kind: 'confirmed'; org: string; id: number; learnerId: number }
  /** The list shows another id than the one given or remembered: reported, the id is kept. */
  | { kind: 'disagrees'; org: string; id: number; seen: number; learnerId: number; source: OrgIdSource }
  /** The list's id is another key's: reported, not remembered (one organization, one budget). */
  | { kind: 'taken'; org: string; seen: number; learnerId: number; message: string };

export interface OrgIdWatchOptions {
  org: string;
  /** The id the crawl starts with, if any, and where it came from. */
  known: { id: number; source: OrgIdSource } | undefined;
  store: OutcomeStore;
  orgIds: OrgIds;
  /** Read only: the id is used for this crawl, not remembered. */
  dryRun: boolean;
  onEvent?: ((e: OrgIdEvent) => void) | undefined;
}

/** Batches of pages a known id is checked against (16 pages each: the first 16,000 or so learners). */
export const KNOWN_ID_CHECKS = 10;

export class OrgIdWatch {
  readonly #o: OrgIdWatchOptions;
  #id: number | undefined;
  #done = false;
  /**
   * An id the crawl already has is only checked: over the first pages, not at the cost of one more read per
   * batch for the whole list (a first crawl sees no learner it moved). An unknown id is looked for to the end.
   */
  #checksLeft: number;

  constructor(options: OrgIdWatchOptions) {
    this.#o = options;
    this.#id = options.known?.id;
    this.#checksLeft = options.known ? KNOWN_ID_CHECKS : Infinity;
  }

  /** The target's id as far as known now (learned ids included). */
  get id(): number | undefined {
    return this.#id;
  }

  /**
   * Looks at a page's learners (one HMGET of their records) until one this tool moved into the target is
   * seen; after that, nothing (no Redis call).
   */
  async observe(learners: readonly Learner[]): Promise<void> {
    if (this.#done || learners.length === 0) return;
    if (this.#checksLeft-- <= 0) {
      this.#done = true;
      return;
    }
    const { org, store } = this.#o;
    const records = await store.getMany(
      org,
      learners.map((l) => l.id),
    );
    // Learners moved in by this tool, by the organization the list shows them in.
    const seen = new Map<number, number>();
    records.forEach((r, i) => {
      const l = learners[i] as Learner;
      if (r && isSuccessBucket(r.b as Bucket) && !seen.has(l.organizationId))
        seen.set(l.organizationId, l.id);
    });
    // None, or learners that disagree among themselves (one moved on since): wait for a clearer page.
    if (seen.size !== 1) return;
    const [[listId, learnerId]] = [...seen] as [[number, number]];
    this.#done = true;
    await this.#settle(listId, learnerId);
  }

  async #settle(seen: number, learnerId: number): Promise<void> {
    const { org, known, orgIds, dryRun, onEvent } = this.#o;
    if (this.#id === seen) {
      onEvent?.({ kind: 'confirmed', org, id: seen, learnerId });
      return;
    }
    if (this.#id !== undefined) {
      onEvent?.({
        kind: 'disagrees',
        org,
        id: this.#id,
        seen,
        learnerId,
        source: known?.source ?? 'remembered',
      });
      return;
    }
    try {
      if (dryRun) await orgIds.check({ [org]: seen });
      const now = dryRun ? seen : await orgIds.learn(org, seen);
      if (now !== seen) {
        // Another process gave or learned an id meanwhile: it stays, and the difference is said.
        this.#id = now;
        onEvent?.({ kind: 'disagrees', org, id: now, seen, learnerId, source: 'remembered' });
        return;
      }
      this.#id = seen;
      onEvent?.({ kind: 'learned', org, id: seen, learnerId, remembered: !dryRun });
    } catch (err) {
      if (!(err instanceof LearnerTransferError) || err.code !== 'LT_ORG_ID_TAKEN') throw err;
      onEvent?.({ kind: 'taken', org, seen, learnerId, message: err.message });
    }
  }
}

/** One line for the operator about what the watch found. */
export function describeOrgIdEvent(e: OrgIdEvent): string {
  switch (e.kind) {
    case 'learned':
      return (
        `learned the organization id of '${e.org}': ${e.id} (learner ${e.learnerId}, moved into '${e.org}' ` +
        `by this tool, is in organization ${e.id} on the list)` +
        (e.remembered ? '; remembered in Redis for later runs' : '; not remembered (dry run)')
      );
    case 'confirmed':
      return `the list confirms the organization id of '${e.org}': ${e.id} (learner ${e.learnerId})`;
    case 'disagrees':
      return (
        `the list disagrees with the organization id of '${e.org}': ${e.source === 'given' ? '--target-org-id' : 'Redis'} ` +
        `says ${e.id}, but learner ${e.learnerId}, moved into '${e.org}' by this tool, is in organization ` +
        `${e.seen} on the list. ${e.id} is kept; if ${e.seen} is right, give --target-org-id ${e.seen} ` +
        `(a learner moved on by someone else since would also explain it)`
      );
    case 'taken':
      return `the list shows ${e.seen} as the organization id of '${e.org}' (learner ${e.learnerId}), not remembered: ${e.message}`;
  }
}
