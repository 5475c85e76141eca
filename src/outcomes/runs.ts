// Runs: one enqueue, crawl, reconcile or retry. A run has metadata (what it came from) and, per
// organization, bucket counters kept by the outcome store.
import { randomBytes } from 'node:crypto';
import { LearnerTransferError } from '../core/errors.ts';
import { isRunId, RUN_ID_EXPECTED } from '../core/ids.ts';
import type { RedisClient } from '../redis/client.ts';
import type { Keys } from '../core/keys.ts';
import type { OutcomeStore, RunCounts } from './store.ts';

export interface RunMeta {
  id: string;
  createdAt: string;
  kind: string;
  source: string;
  orgs: string[];
  /** A reconcile's drift report (the file of what differed). */
  driftReport?: string | undefined;
  /** A run compacted after RUN_RETENTION: when, and its counters then. */
  compacted?: { at: string; byOrg: Record<string, RunCounts> } | undefined;
  /** The newest retry that re-queued this run's learners: when, how many, by whom. */
  retried?: RetryNote | undefined;
  /** A canary run (`--canary N`, docs/canary.md); absent on others, which send every learner. */
  canary?: CanaryMeta | undefined;
}

export interface CanaryMeta {
  /** Learners sent first, per organization of the run. */
  size: number;
  /** Approved by the worker recording the canary's last outcome, when within the error budget. */
  autoApprove: boolean;
  /** Per organization released: when, by whom. */
  approved: Record<string, ApprovalNote>;
  /** Per organization whose auto-approval was refused: why, in words. */
  refused: Record<string, string>;
}

export interface ApprovalNote {
  at: string;
  by: string;
}

export interface RetryNote {
  at: string;
  count: number;
  /** The change log's author (cli:user@host, dashboard:operator@address). */
  by: string;
}

/** The canary fields of a run's hash. */
function canaryOf(h: Record<string, string>): CanaryMeta {
  const approved: Record<string, ApprovalNote> = {};
  const refused: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith('approved:')) {
      try {
        const n = JSON.parse(v) as Partial<ApprovalNote>;
        approved[k.slice(9)] = { at: String(n.at ?? ''), by: String(n.by ?? '') };
      } catch {
        approved[k.slice(9)] = { at: '', by: '' };
      }
    } else if (k.startsWith('canaryRefused:')) refused[k.slice(14)] = v;
  }
  return { size: Number(h.canary), autoApprove: h.canaryAuto === '1', approved, refused };
}

/** Sortable, readable run ids: 20261122T015153-3f9a (letters, digits and '-': they fit isRunId). */
export function newRunId(now = new Date()): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, '');
  return `${stamp}-${randomBytes(2).toString('hex')}`;
}

export class Runs {
  readonly #redis: RedisClient;
  readonly #keys: Keys;
  constructor(redis: RedisClient, keys: Keys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async create(meta: Omit<RunMeta, 'createdAt'>, now = new Date()): Promise<RunMeta> {
    // The last guard: every entry point checks its run id first.
    if (!isRunId(meta.id)) {
      throw new LearnerTransferError(
        'LT_USAGE',
        `run id: expected ${RUN_ID_EXPECTED}, got '${meta.id.slice(0, 80)}'`,
      );
    }
    const full: RunMeta = { ...meta, createdAt: now.toISOString() };
    // Two slots, no MULTI: the run first, then the list, so a listed run can always be read.
    await this.#redis.hset(this.#keys.run(meta.id), {
      createdAt: full.createdAt,
      kind: full.kind,
      source: full.source,
      orgs: full.orgs.join(','),
      ...(full.driftReport ? { driftReport: full.driftReport } : {}),
      ...(full.canary
        ? { canary: String(full.canary.size), ...(full.canary.autoApprove ? { canaryAuto: '1' } : {}) }
        : {}),
    });
    await this.#redis.zadd(this.#keys.runs(), now.getTime(), meta.id);
    return full;
  }

  /** Adds organizations a run touched (a CSV's org column can name several). */
  async addOrgs(runId: string, orgs: readonly string[]): Promise<void> {
    const meta = await this.get(runId);
    if (!meta) return;
    const merged = [...new Set([...meta.orgs, ...orgs])];
    await this.#redis.hset(this.#keys.run(runId), 'orgs', merged.join(','));
  }

  /** Names the drift report of a reconcile that added to an existing run. */
  async setDriftReport(runId: string, path: string): Promise<void> {
    await this.#redis.hset(this.#keys.run(runId), 'driftReport', path);
  }

  async get(runId: string): Promise<RunMeta | undefined> {
    const h = await this.#redis.hgetall(this.#keys.run(runId));
    if (!h.createdAt) return this.#compacted(runId);
    return {
      id: runId,
      createdAt: h.createdAt,
      kind: h.kind ?? '',
      source: h.source ?? '',
      orgs: (h.orgs ?? '').split(',').filter(Boolean),
      ...(h.driftReport ? { driftReport: h.driftReport } : {}),
      ...(h.retriedAt
        ? { retried: { at: h.retriedAt, count: Number(h.retriedCount ?? 0), by: h.retriedBy ?? '' } }
        : {}),
      ...(h.canary ? { canary: canaryOf(h) } : {}),
    };
  }

  /**
   * Notes a canary run approved in an organization. `first`: only if not yet (of two workers
   * auto-approving at once, one wins); returns whether this call wrote the note.
   */
  async noteApproved(runId: string, org: string, note: ApprovalNote, first = false): Promise<boolean> {
    const field = `approved:${org}`;
    const text = JSON.stringify(note);
    if (first) return (await this.#redis.hsetnx(this.#keys.run(runId), field, text)) === 1;
    await this.#redis.hset(this.#keys.run(runId), field, text);
    return true;
  }

  /** Notes why a canary run's auto-approval was refused in an organization. */
  async noteCanaryRefused(runId: string, org: string, why: string): Promise<void> {
    await this.#redis.hset(this.#keys.run(runId), `canaryRefused:${org}`, why);
  }

  /** Notes a retry of this run's learners and brings the run to the top of list(). */
  async noteRetry(runId: string, note: RetryNote): Promise<void> {
    if (!(await this.#redis.exists(this.#keys.run(runId)))) return; // compacted or unknown: nothing to mark
    await this.#redis.hset(this.#keys.run(runId), {
      retriedAt: note.at,
      retriedCount: String(note.count),
      retriedBy: note.by,
    });
    await this.#redis.zadd(this.#keys.runsActive(), Date.parse(note.at), runId);
  }

  /** A run compacted after RUN_RETENTION, from its summary. */
  async #compacted(runId: string): Promise<RunMeta | undefined> {
    const text = await this.#redis.hget(this.#keys.runsCompacted(), runId);
    if (!text) return undefined;
    try {
      const meta = JSON.parse(text) as RunMeta;
      return meta.compacted ? { ...meta, id: runId } : undefined;
    } catch {
      return undefined;
    }
  }

  /** Whether a run of this id is stored (see isReadableRunId). */
  async exists(runId: string): Promise<boolean> {
    return (await this.get(runId)) !== undefined;
  }

  /** Newest first, by the later of its creation and its newest retry. */
  async list(limit = 50): Promise<RunMeta[]> {
    const [created, active] = await Promise.all([
      this.#redis.zrevrange(this.#keys.runs(), 0, limit - 1, 'WITHSCORES'),
      this.#redis.zrevrange(this.#keys.runsActive(), 0, limit - 1, 'WITHSCORES'),
    ]);
    const latest = new Map<string, number>();
    const listed = new Set<string>();
    const read = (flat: string[], own: boolean) => {
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const id = flat[i] as string;
        const score = Number(flat[i + 1]);
        if (own) listed.add(id);
        latest.set(id, Math.max(latest.get(id) ?? -Infinity, score));
      }
    };
    read(created, true);
    read(active, false);
    const ids = [...latest.entries()]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? 1 : -1))
      .slice(0, limit)
      .map(([id]) => id);
    const metas = await Promise.all(ids.map((id) => this.get(id)));
    // A run retried once and compacted since has left the list by creation: it stays out.
    return metas.filter(
      (m): m is RunMeta => m !== undefined && (listed.has(m.id) || m.compacted === undefined),
    );
  }

  async latest(): Promise<RunMeta | undefined> {
    return (await this.list(1))[0];
  }

  /** Counters of a run summed over its organizations, and per organization. */
  async counts(
    store: OutcomeStore,
    run: RunMeta,
  ): Promise<{ total: RunCounts; byOrg: Record<string, RunCounts> }> {
    const byOrg: Record<string, RunCounts> = {};
    const total: RunCounts = {};
    for (const org of run.orgs) {
      const c = run.compacted ? (run.compacted.byOrg[org] ?? {}) : await store.runCounts(org, run.id);
      byOrg[org] = c;
      for (const [k, v] of Object.entries(c))
        total[k as keyof RunCounts] = (total[k as keyof RunCounts] ?? 0) + v;
    }
    return { total, byOrg };
  }
}
