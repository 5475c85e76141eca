// The learners and what transfers did to them. Every mutation of a learner happens here, synchronously,
// so concurrent requests cannot interleave inside one transfer.
import { performance } from 'node:perf_hooks';
import { formatDateTime, formatMicroIso } from './format.ts';
import { stream, type Random } from './random.ts';
import { groupsOf } from './seed.ts';
import type { LearnerListItem, SimLearner, SimOrg, TransferDetails, TransferResultBody } from './types.ts';
import { LearnerTransferError } from '../core/errors.ts';

export type TransferOutcome =
  | { kind: 'transferred'; body: TransferResultBody }
  | { kind: 'repeat-success'; body: TransferResultBody }
  | { kind: 'already-in-org' }
  | { kind: 'not-found' };

/** The six-digit timestamp needs sub-millisecond digits; performance.now() supplies real ones. */
function nowMicroIso(now: number): string {
  return formatMicroIso(now, (performance.now() % 1) * 1000);
}

export class SimState {
  private readonly learners: SimLearner[];
  private readonly transfers = new Map<number, TransferResultBody[]>();
  /** The transfer that last brought a learner into an organization, answered again on a repeat. */
  private readonly lastInto = new Map<number, { orgId: number; details: TransferDetails }>();
  private readonly random: Random;

  constructor(learners: SimLearner[], seed: number) {
    this.learners = learners;
    this.random = stream(seed, 'transfers');
  }

  get total(): number {
    return this.learners.length;
  }

  learner(id: number): SimLearner | undefined {
    const l = this.find(id);
    return l ? structuredClone(l) : undefined;
  }

  /** Learners at positions [from, to) in id order, as the list operation shows them. */
  slice(from: number, to: number): LearnerListItem[] {
    return this.learners.slice(from, to).map(toListItem);
  }

  ownerChanges(learnerId: number): number {
    return this.transfers.get(learnerId)?.length ?? 0;
  }

  transfersOf(learnerId: number): TransferResultBody[] {
    return structuredClone(this.transfers.get(learnerId) ?? []);
  }

  /**
   * Transfers a learner into `org`. When it is already there, `repeat` picks one of the spec's two
   * answers: 'success' (200, no duplicate transfer) or 'error' (400 "already associated").
   */
  transfer(learnerId: number, org: SimOrg, repeat: 'success' | 'error', now = Date.now()): TransferOutcome {
    const learner = this.find(learnerId);
    if (!learner) return { kind: 'not-found' };
    if (learner.organizationId === org.id) {
      if (repeat === 'error') return { kind: 'already-in-org' };
      return { kind: 'repeat-success', body: this.repeatBody(learner, org, now) };
    }
    const details = this.newDetails(learner, now);
    const [joined] = groupsOf(org);
    const body: TransferResultBody = {
      success: true,
      message: 'Learner transferred successfully',
      data: {
        learnerId: learner.id,
        newOwner: org.name,
        transferDetails: details,
        learnerGroups: { removed: learner.groups, added: joined ? [joined] : [] },
        authorizations: { revoked: learner.authorizations },
      },
    };
    learner.groups = joined ? [joined] : [];
    learner.authorizations = [];
    learner.organizationId = org.id;
    learner.updatedAt = formatDateTime(now);
    this.lastInto.set(learner.id, { orgId: org.id, details });
    const list = this.transfers.get(learner.id) ?? [];
    list.push(body);
    this.transfers.set(learner.id, list);
    return { kind: 'transferred', body: structuredClone(body) };
  }

  /**
   * A repeat answers the transfer that brought the learner in (same transferId), with nothing
   * removed, added or revoked. A learner there from the start gets a fresh-looking transferId,
   * remembered so later repeats agree, and no entry in transfersOf().
   */
  private repeatBody(learner: SimLearner, org: SimOrg, now: number): TransferResultBody {
    let last = this.lastInto.get(learner.id);
    if (!last || last.orgId !== org.id) {
      last = { orgId: org.id, details: this.newDetails(learner, now) };
      this.lastInto.set(learner.id, last);
    }
    return {
      success: true,
      message: 'Learner is already associated with the organization; no new transfer was created',
      data: {
        learnerId: learner.id,
        newOwner: org.name,
        transferDetails: structuredClone(last.details),
        learnerGroups: { removed: [], added: [] },
        authorizations: { revoked: [] },
      },
    };
  }

  private newDetails(learner: SimLearner, now: number): TransferDetails {
    return {
      transferId: `trf_${this.random.hex(24)}`,
      initiatedAt: nowMicroIso(now),
      status: 'completed',
      assessmentIds: [...learner.assessmentIds],
    };
  }

  /**
   * Test hook: inserts a new learner (id = largest + 1) at list position `index` (0-based,
   * clamped), shifting every later learner one position on.
   */
  insertLearner(
    index: number,
    fields: Pick<SimLearner, 'organizationId' | 'isActive'> & { userId?: number | null | undefined },
  ): number {
    const model = this.learners[0];
    if (!model)
      throw new LearnerTransferError(
        'LT_SIMULATOR_OPTIONS',
        'simulator: insertLearner needs at least one seeded learner',
      );
    const id = this.learners.reduce((max, l) => Math.max(max, l.id), 0) + 1;
    const learner: SimLearner = {
      ...structuredClone(model),
      organizationId: fields.organizationId,
      isActive: fields.isActive,
      // A user attached unless told otherwise, numbered like the seeded learners' users.
      userId: fields.userId === undefined ? 100_000 + id : fields.userId,
      id,
      groups: [],
      authorizations: [],
      assessmentIds: [],
    };
    this.learners.splice(Math.max(0, Math.min(index, this.learners.length)), 0, learner);
    return id;
  }

  /** Test hook: the learner leaves the list, every later learner moves one position back. */
  removeLearner(id: number): boolean {
    const at = this.learners.findIndex((l) => l.id === id);
    if (at < 0) return false;
    this.learners.splice(at, 1);
    return true;
  }

  private find(id: number): SimLearner | undefined {
    if (!Number.isSafeInteger(id) || id < 1) return undefined;
    // Ids are list positions + 1 until a test hook inserts or removes a learner.
    const at = this.learners[id - 1];
    return at?.id === id ? at : this.learners.find((l) => l.id === id);
  }
}

export function toListItem(l: SimLearner): LearnerListItem {
  return {
    id: l.id,
    code: l.code,
    color: l.color,
    dateOfBirth: l.dateOfBirth,
    firstName: l.firstName,
    lastName: l.lastName,
    gender: l.gender,
    isActive: l.isActive,
    createdAt: l.createdAt,
    updatedAt: l.updatedAt,
    organizationId: l.organizationId,
    parent: l.parent,
    userId: l.userId,
    reportsGenerated: l.reportsGenerated,
    v2id: l.v2id,
  };
}
