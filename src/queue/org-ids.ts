// The numeric id of each organization key, given once or learned from the list and remembered in Redis
// (docs/crawl.md). No two keys may share an id: each would spend the organization's daily budget.
import type { RedisClient } from '../redis/client.ts';
import { QUEUE_SCRIPTS } from './scripts.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { type Keys } from '../core/keys.ts';

export class OrgIds {
  readonly #redis: RedisClient;
  readonly #key: string;
  constructor(redis: RedisClient, keys: Keys) {
    this.#redis = redis;
    this.#key = keys.orgIds();
    QUEUE_SCRIPTS.define(redis);
  }

  async all(): Promise<Record<string, number>> {
    const raw = await this.#redis.hgetall(this.#key);
    const out: Record<string, number> = {};
    for (const [k, v] of Object.entries(raw)) if (Number.isSafeInteger(Number(v))) out[k] = Number(v);
    return out;
  }

  /** Remembers the ids; refuses (LT_ORG_ID_TAKEN, nothing written) an id another key has. */
  async set(ids: Readonly<Record<string, number>>): Promise<void> {
    await this.#run('set', ids);
  }

  /** What set() would refuse, without writing (dry runs; ids remembered earlier). */
  async check(ids: Readonly<Record<string, number>>): Promise<void> {
    await this.#run('check', ids);
  }

  /** The remembered id of `org`, if any. */
  async get(org: string): Promise<number | undefined> {
    const v = await this.#redis.hget(this.#key, org);
    return v !== null && Number.isSafeInteger(Number(v)) ? Number(v) : undefined;
  }

  /**
   * Remembers `id` for `org` when it has none; refuses (LT_ORG_ID_TAKEN) an id another key has.
   * Returns the id `org` has now.
   */
  async learn(org: string, id: number): Promise<number> {
    await this.#run('learn', { [org]: id });
    return (await this.get(org)) ?? id;
  }

  async #run(mode: 'set' | 'check' | 'learn', ids: Readonly<Record<string, number>>): Promise<void> {
    const pairs = Object.entries(ids).flatMap(([org, id]) => [org, String(id)]);
    if (pairs.length === 0) return;
    const taken = (await QUEUE_SCRIPTS.run(
      this.#redis,
      'set-org-ids',
      [this.#key],
      [mode, ...pairs],
    )) as string[];
    const [org, other, id] = taken;
    if (org !== undefined && other !== undefined && id !== undefined)
      throw orgIdTaken(org, other, Number(id));
  }

  /**
   * The id of `org`: `given` (then remembered), else the remembered one, else an error that says how to
   * give it. `dryRun` reads only.
   */
  async resolve(org: string, given: number | undefined, flag: string, dryRun = false): Promise<number> {
    if (given !== undefined) {
      await (dryRun ? this.check({ [org]: given }) : this.set({ [org]: given }));
      return given;
    }
    const known = (await this.all())[org];
    if (known === undefined) throw unknownOrgId(org, flag);
    // Remembered before ids were checked, another key may share it.
    await this.check({ [org]: known });
    return known;
  }
}

export function orgIdTaken(org: string, other: string, id: number): LearnerTransferError {
  return new LearnerTransferError(
    'LT_ORG_ID_TAKEN',
    `organization id ${id} is already the id of '${other}' in Redis, so '${org}' cannot have it too: two keys ` +
      `for one organization would each spend its daily budget (LIMIT_PER_ORG). If '${org}' and '${other}' ` +
      `are the same organization, give its tokens one key in LEARNER_API_TOKENS; if ${id} is not ` +
      `'${other}''s id, give '${other}' its right one first (--org-id ${other}=N).`,
  );
}

export function unknownOrgId(org: string, flag: string): LearnerTransferError {
  return new LearnerTransferError(
    'LT_USAGE',
    `the numeric organization id of '${org}' is not known, so learners already in it cannot be told ` +
      `apart: give ${flag} once (crawl, reconcile, schedule and plan --check remember it in Redis for later ` +
      `runs; a dry run such as plan --crawl uses it for itself only). The Learner API does not ` +
      `show it: it is the organizationId the learner list shows for learners of '${org}'.`,
  );
}
