// The world one run of the outcome store model works in: the model (outcomes-model.ts) and the real system
// (outcomes-system.ts) side by side, one organization per run, with the service's answers as data and the
// checks of the outcome store's properties. The commands that drive it are in outcomes-commands.ts.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { TransferOutcome } from '../../src/api/outcome.ts';
import { transferResultSchema } from '../../src/api/schemas.ts';
import { loadConfig } from '../../src/core/config.ts';
import { createKeys, type Keys } from '../../src/core/keys.ts';
import { createLogger } from '../../src/core/log.ts';
import { TransferBudget } from '../../src/limiter/index.ts';
import {
  BUCKETS,
  decodeRecord,
  isIndexedBucket,
  isSuccessBucket,
  shortAttemptId as shortId,
} from '../../src/outcomes/record.ts';
import type { AuditEntry } from '../../src/outcomes/audit-entry.ts';
import { OutcomeStore, type FinishArgs } from '../../src/outcomes/store.ts';
import { JOB_NAME, jobIdOf } from '../../src/queue/job.ts';
import { QueueSet } from '../../src/queue/queues.ts';
import type { RedisClient } from '../../src/redis/client.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';
import { OutcomesModel, type ModelAuditEntry } from './outcomes-model.ts';
import { ModelWorker, type Shared } from './outcomes-system.ts';

/** Lease (and in-flight) TTL and grace: short, so a takeover costs a few ms of real time. */
export const LEASE_TTL_MS = 8;
export const GRACE_MS = 5;
export const RUN = 'run-1';
export const MAX_ATTEMPTS = 5;

/** What the runs met (reset per seed): a property that never took a lease over proves nothing of takeovers. */
export const seen = new Map<string, number>();
export const meet = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1);

/** What every run shares: one Redis connection and key prefix, the stores, the budget, the spool root. */
export interface Env {
  redis: RedisClient;
  keys: Keys;
  store: OutcomeStore;
  queues: QueueSet;
  shared: Shared;
  root: string;
  close(): Promise<void>;
}

export function openEnv(): Env {
  const redis = newRedis();
  const prefix = randomPrefix('model');
  const keys = createKeys(prefix);
  const config = loadConfig({
    QUEUE_PREFIX: prefix,
    LEARNER_API_TOKENS: 'acme:model-token-1',
    LOG_LEVEL: 'silent',
  });
  const token = config.tokens[0];
  if (!token) throw new Error('no token in the config');
  const budget = new TransferBudget(redis, {
    prefix,
    limitPerToken: { max: 1_000_000, windowMs: 60_000 },
    limitPerOrg: { max: 1_000_000, windowMs: 60_000 },
    inflightTtlMs: LEASE_TTL_MS,
  });
  const logger = createLogger({ level: 'silent' });
  const shared: Shared = { redis, keys, prefix, budget, config, token, logger, graceMs: GRACE_MS };
  // The spools on tmpfs where there is one: every answer that may have changed something is fsynced, and
  // a run of the model spools hundreds.
  const root = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'lt-model-'));
  const queues = new QueueSet(redis, keys, config);
  return {
    redis,
    keys,
    store: new OutcomeStore(redis, keys),
    queues,
    shared,
    root,
    async close() {
      await queues.close();
      rmSync(root, { recursive: true, force: true });
      await deletePrefix(redis, prefix);
      await redis.quit();
    },
  };
}

export type Start = 'both' | 'record-only' | 'job-only';

export interface Abandoned {
  file: string;
  args: FinishArgs[];
}

export class World {
  readonly model: OutcomesModel;
  readonly workers: ModelWorker[] = [];
  abandoned: Abandoned[] = [];
  transfers = 0;
  readonly dir: string;
  /** What happened, for the failure report. */
  readonly log: string[] = [];

  constructor(
    readonly env: Env,
    readonly org: string,
    readonly learners: number[],
    readonly start: Start[],
  ) {
    this.model = new OutcomesModel(learners, LEASE_TTL_MS, GRACE_MS);
    this.dir = join(env.root, org);
  }

  /** Organization `m<run>` with one learner per entry of `start`, each with its record, its job or both. */
  static async create(env: Env, run: number, start: Start[]): Promise<World> {
    const learners = start.map((_, i) => i + 1);
    const w = new World(env, `m${run}`, learners, start);
    const marks = learners.filter((_, i) => start[i] !== 'job-only');
    await env.store.markQueued(
      marks.map((learnerId) => ({ org: w.org, learnerId, runId: RUN, source: 'model', force: false })),
    );
    for (const id of marks) w.model.queued(id, RUN);
    const jobs = learners.filter((_, i) => start[i] !== 'record-only');
    for (const id of jobs) {
      await env.queues
        .get(w.org)
        .add(JOB_NAME, { org: w.org, learnerId: id, runId: RUN, source: 'model' }, { jobId: jobIdOf(id) });
      w.model.jobs.add(id);
    }
    for (const name of ['W0', 'W1'])
      w.workers.push(await ModelWorker.start(name, w.org, RUN, w.dir, env.shared));
    return w;
  }

  get abandonedDir(): string {
    return join(this.dir, 'abandoned');
  }

  /** The learner's record in Redis must be the model's. */
  async expectRecord(learnerId: number): Promise<void> {
    const text = await this.env.redis.hget(this.env.keys.outcomes(this.org), String(learnerId));
    const want = this.model.records.get(learnerId);
    const where = `learner ${learnerId}'s record ${text}`;
    if (!want) {
      expect(text, where).toBeNull();
      return;
    }
    const rec = decodeRecord(text);
    expect(rec, where).toBeDefined();
    if (!rec) return;
    const auditIds = await Promise.all(
      want.audit.map((k) => this.env.redis.hget(this.env.keys.auditIds(this.org), k)),
    );
    expect(
      {
        bucket: rec.b,
        runId: rec.r,
        attempts: rec.a,
        transferId: rec.x,
        possibleRepeat: rec.pr === 1,
        audit: rec.au ?? [],
        // A compacted record keeps its merged attempts as short hashes (ah), later ones whole (ai).
        lastMerged: [...(rec.ah ?? []), ...(rec.ai ?? []).map(shortId)].slice(-10),
      },
      where,
    ).toEqual({
      bucket: want.bucket,
      runId: want.runId,
      attempts: want.attempts,
      transferId: want.transferId,
      possibleRepeat: want.possibleRepeat,
      audit: auditIds.slice(-10),
      lastMerged: want.merged.slice(-10).map(shortId),
    });
  }

  /** Everything the outcome store holds for the organization, to prove a step wrote nothing. */
  async snapshot() {
    return {
      records: await this.env.redis.hgetall(this.env.keys.outcomes(this.org)),
      org: await this.env.redis.hgetall(this.env.keys.orgCounts(this.org)),
      run: await this.env.redis.hgetall(this.env.keys.runCounters(this.org, RUN)),
      audit: await this.env.redis.xlen(this.env.keys.audit(this.org)),
      dedupe: await this.env.redis.hgetall(this.env.keys.auditIds(this.org)),
    };
  }

  /** The service's answer of one kind, given what it has done to the learner so far. */
  answer(learnerId: number, kind: AnswerKind): TransferOutcome {
    const inOrg = this.model.inOrg.has(learnerId);
    const durationMs = 12;
    const transferKinds: AnswerKind[] = ['transfer-ok', 'transfer-cut', 'transfer-lost', 'repeat-200'];
    if (transferKinds.includes(kind)) {
      if (kind === 'transfer-lost') this.effect(learnerId, inOrg, false);
      if (kind === 'transfer-lost')
        return {
          code: 'network-error',
          errorCode: 'UND_ERR_SOCKET',
          message: 'other side closed',
          maybeDelivered: true,
          durationMs,
        };
      if (inOrg && kind === 'repeat-200') {
        // As the spec and the simulator answer a repeat: the id of the transfer that moved the learner in
        // ("no duplicate transfer"), with nothing revoked; a learner in the organization from the start
        // gets an id of its own.
        const moved = this.model.effects.filter((e) => e.learnerId === learnerId).at(-1)?.transferId;
        const { result, raw } = this.body(learnerId, moved ?? `R${++this.transfers}`, []);
        return Object.assign(
          {
            code: 'already-in-org' as const,
            status: 200 as const,
            via: 'repeat-success' as const,
            result,
            durationMs,
          },
          { raw },
        );
      }
      if (inOrg)
        return {
          code: 'already-in-org',
          status: 400,
          via: 'already-associated',
          error: 'Bad Request',
          message: 'The learner is already associated with this organization',
          durationMs,
        };
      const effect = this.effect(learnerId, inOrg, kind !== 'transfer-cut');
      const { result, raw } = this.body(learnerId, effect.transferId, effect.revoked);
      if (kind === 'transfer-cut') {
        const body = raw.slice(0, Math.floor(raw.length / 2));
        return {
          code: 'bad-response',
          status: 200,
          message: 'not JSON',
          bodyStart: body.slice(0, 100),
          body,
          durationMs,
        };
      }
      return Object.assign(
        { code: 'transferred' as const, status: 200 as const, result, durationMs },
        { raw },
      );
    }
    switch (kind) {
      case 'not-sent':
        return {
          code: 'network-error',
          errorCode: 'ECONNREFUSED',
          message: 'refused',
          maybeDelivered: false,
          durationMs,
        };
      case 'forbidden':
        return { code: 'forbidden', status: 403, error: 'Forbidden', message: 'not yours', durationMs };
      case 'server-error':
        return {
          code: 'server-error',
          status: 500,
          error: 'Internal Server Error',
          message: 'oops',
          durationMs,
        };
      default:
        return { code: 'rate-limited', status: 429, durationMs };
    }
  }

  /** The service moves the learner (when it is not in the organization yet), revoking what it had. */
  effect(learnerId: number, inOrg: boolean, delivered: boolean) {
    const transferId = `T${++this.transfers}`;
    const revoked = inOrg
      ? []
      : [`u${this.transfers}a.l${learnerId}@example.test`, `u${this.transfers}b.l${learnerId}@example.test`];
    if (!inOrg) {
      this.model.inOrg.add(learnerId);
      this.model.effects.push({ learnerId, transferId, revoked, delivered });
    }
    return { transferId, revoked };
  }

  body(learnerId: number, transferId: string, revoked: string[]) {
    const body = {
      success: true,
      data: {
        learnerId,
        newOwner: 'acme',
        transferDetails: {
          transferId,
          initiatedAt: '2026-11-26T00:00:00Z',
          status: 'completed',
          assessmentIds: [],
        },
        learnerGroups: { removed: [], added: [] },
        authorizations: {
          revoked: revoked.map((email, i) => ({ userId: i + 1, email, name: null, role: 'teacher' })),
        },
      },
    };
    return { result: transferResultSchema.parse(body), raw: JSON.stringify(body) };
  }

  /** The outcome store's properties, once nothing is in flight. */
  async expectOutcomes(): Promise<void> {
    const m = this.model;
    // One record per learner, as the model says.
    const all = await this.env.redis.hgetall(this.env.keys.outcomes(this.org));
    expect(Object.keys(all).map(Number).sort(), 'learners with a record').toEqual(
      [...m.records.keys()].sort(),
    );
    for (const id of this.learners) await this.expectRecord(id);

    // Counters: the organization's and the run's agree with the records (all in the one run).
    const tally = m.tally();
    expect(await this.env.store.orgCounts(this.org), 'org counters').toEqual(tally);
    expect(await this.env.store.runCounts(this.org, RUN), 'run counters').toEqual(
      m.records.size > 0 ? { ...tally, total: m.records.size } : {},
    );
    // Each learner in its own bucket's index only.
    for (const b of BUCKETS.filter(isIndexedBucket)) {
      const members = (await this.env.redis.zrange(this.env.keys.outcomeIndex(this.org, b), 0, -1))
        .map(Number)
        .sort();
      const want = [...m.records]
        .filter(([, r]) => r.bucket === b)
        .map(([id]) => id)
        .sort();
      expect(members, `index of '${b}'`).toEqual(want);
    }

    // The audit: one entry per dedupe key, as the model says.
    const entries: AuditEntry[] = [];
    const stories: AuditEntry[] = [];
    for await (const e of this.env.store.audit(this.org)) (e.kind === 'record' ? stories : entries).push(e);
    const dedupe = await this.env.redis.hgetall(this.env.keys.auditIds(this.org));
    const auditKeys = Object.keys(dedupe).filter((k) => !k.startsWith('b:'));
    expect(auditKeys.sort(), 'audit dedupe keys').toEqual([...m.dedupe].sort());
    expect(entries.length, 'audit entries').toBe(m.audit.size);
    expect(stories.length, 'story entries of compacted records').toBe(m.stories);
    // Each entry found by its key while the key is kept. Once a compaction dropped the key, by what it
    // holds, each entry of the stream matched once: a repeat's answer (keyed by its attempt, marked a
    // possible repeat) and the transfer's own answer replayed late carry the same transfer id and kind.
    const used = new Set<string>();
    const entryOf = (key: string, want: ModelAuditEntry) => {
      if (dedupe[key] !== undefined) return entries.find((e) => e.id === dedupe[key]);
      const same = (e: AuditEntry) =>
        !used.has(e.id) &&
        e.learnerId === want.learnerId &&
        e.transferId === want.transferId &&
        e.kind === want.kind;
      return entries.find((e) => same(e) && e.possibleRepeat === want.possibleRepeat) ?? entries.find(same);
    };
    for (const [key, want] of m.audit) {
      const entry = entryOf(key, want);
      if (entry) used.add(entry.id);
      expect(
        entry && {
          learnerId: entry.learnerId,
          transferId: entry.transferId,
          kind: entry.kind,
          pr: entry.possibleRepeat,
        },
        `audit entry ${key}`,
      ).toEqual({
        learnerId: want.learnerId,
        transferId: want.transferId,
        kind: want.kind,
        pr: want.possibleRepeat,
      });
    }
    // Every revocation whose answer arrived is in exactly one audit entry; one whose answer was lost
    // leaves its learner anything but an unmarked success.
    for (const e of m.effects) {
      const rec = m.records.get(e.learnerId);
      if (e.delivered) {
        for (const email of e.revoked) {
          const holding = entries.filter((x) => (x.raw ?? '').includes(email));
          expect(
            holding.map((x) => x.transferId),
            `entries holding ${email}`,
          ).toEqual([e.transferId]);
        }
      } else if (rec) {
        if (rec.possibleRepeat)
          meet('a transfer whose answer was lost: its learner marked a possible repeat');
        expect(
          isSuccessBucket(rec.bucket) && !rec.possibleRepeat,
          `learner ${e.learnerId} moved by ${e.transferId} (answer lost) is ${rec.bucket} without a possible-repeat mark`,
        ).toBe(false);
      }
    }

    // Leases as the lease rules left them.
    const leases = await this.env.redis.hgetall(this.env.keys.lease(this.org));
    const want: Record<string, string> = {};
    for (const [id, l] of m.leases) want[String(id)] = `${l.holder} ${l.deadline} ${l.contested}`;
    expect(leases, 'leases').toEqual(want);
  }

  async close(): Promise<void> {
    for (const w of this.workers) await w.close();
  }
}

export type AnswerKind =
  | 'transfer-ok'
  | 'transfer-cut'
  | 'transfer-lost'
  | 'repeat-200'
  | 'not-sent'
  | 'forbidden'
  | 'server-error'
  | 'rate-limited';
export const ANSWERS: AnswerKind[] = [
  'transfer-ok',
  'transfer-cut',
  'transfer-lost',
  'repeat-200',
  'not-sent',
  'forbidden',
  'server-error',
  'rate-limited',
];
