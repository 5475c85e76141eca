// The numeric id of each organization key. The API never shows it (a learner's organizationId is a
// number, our tokens are named by key), yet crawl must skip learners already in the target and
// reconcile must compare owners. So the operator gives it once (--target-org-id N, --org-id KEY=N) and
// it is remembered in Redis for later runs, scheduled ones included.
import type { Redis } from 'ioredis';
import { InvalidArgumentError } from 'commander';
import { LearnerTransferError } from '../errors.ts';
import { isValidOrgKey, type Keys } from '../keys.ts';

export class OrgIds {
  readonly #redis: Redis;
  readonly #key: string;
  constructor(redis: Redis, keys: Keys) {
    this.#redis = redis;
    this.#key = keys.orgIds();
  }

  async all(): Promise<Record<string, number>> {
    const raw = await this.#redis.hgetall(this.#key);
    const out: Record<string, number> = {};
    for (const [k, v] of Object.entries(raw)) if (Number.isSafeInteger(Number(v))) out[k] = Number(v);
    return out;
  }

  async set(ids: Readonly<Record<string, number>>): Promise<void> {
    if (Object.keys(ids).length > 0) await this.#redis.hset(this.#key, ids);
  }

  /**
   * The id of `org`: `given` (then remembered), else the remembered one, else an error that says how to
   * give it. `dryRun` reads only.
   */
  async resolve(org: string, given: number | undefined, flag: string, dryRun = false): Promise<number> {
    if (given !== undefined) {
      if (!dryRun) await this.set({ [org]: given });
      return given;
    }
    const known = (await this.all())[org];
    if (known !== undefined) return known;
    throw unknownOrgId(org, flag);
  }
}

export function unknownOrgId(org: string, flag: string): LearnerTransferError {
  return new LearnerTransferError(
    'LT_USAGE',
    `the numeric organization id of '${org}' is not known, so learners already in it cannot be told ` +
      `apart: give ${flag} once (it is remembered in Redis for later runs). The Learner API does not ` +
      `show it: it is the organizationId the learner list shows for learners of '${org}'.`,
  );
}

/** commander parser for repeatable --org-id KEY=N. */
export function parseOrgIdPair(value: string, previous: Record<string, number> = {}): Record<string, number> {
  const m = /^\s*([^=\s]+)\s*=\s*(\d+)\s*$/.exec(value);
  const id = m ? Number(m[2]) : NaN;
  if (!m || !m[1] || !isValidOrgKey(m[1]) || !Number.isSafeInteger(id) || id < 1) {
    throw new InvalidArgumentError(`--org-id expects KEY=N like acme=1, got '${value}'`);
  }
  return { ...previous, [m[1]]: id };
}
