// What the limiter's model test (limiter.model.test.ts) compares after each command that writes: every
// sorted set, the policy fields acquire reads and the pace hash of both organizations, against the model
// (limiter-model.ts), read in one call per organization.
import type { Redis } from 'ioredis';
import type { Keys } from '../../src/core/keys.ts';
import type { OrgModel, Scope } from './limiter-model.ts';

/** Throws, naming the step and what differs, unless the limiter's and the model's values are the same. */
export function agree(step: string, what: string, real: unknown, model: unknown): void {
  const r = JSON.stringify(real);
  const m = JSON.stringify(model);
  if (r !== m) throw new Error(`${step}: ${what}: the limiter has ${r}, the model ${m}`);
}

const pairs = (flat: string[]): Array<[string, string]> => {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i] as string, flat[i + 1] as string]);
  return out;
};
const byKey = <V>(entries: Iterable<readonly [string, V]>) =>
  Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
const MODELED = /^(org|token|tok:.+|reserve|reserveShare|learned:.+|paused|paused:.+|burst|open)$/;

/**
 * One organization's state in one call (a round trip per command would cost more than the commands
 * checked): every sorted set in KEYS but the last two, then the policy hash and the pace hash; with
 * ARGV[1] = '1' the pace hash's TTL is set to a minute (see "The clock" in limiter.model.test.ts: a tat
 * past its refill reads as none, so the hash may outlive the run).
 */
const DUMP = `local out = {}
for i = 1, #KEYS - 2 do
  out[i] = redis.call('ZRANGE', KEYS[i], 0, -1, 'WITHSCORES')
end
out[#KEYS - 1] = redis.call('HGETALL', KEYS[#KEYS - 1])
out[#KEYS] = redis.call('HGETALL', KEYS[#KEYS])
if ARGV[1] == '1' then
  redis.call('PEXPIRE', KEYS[#KEYS], 60000)
end
return out`;

/**
 * Every sorted set, every policy field acquire reads and the pace hash (tats to 1e-3), of both
 * organizations, against the model.
 */
export async function compareState(
  redis: Redis,
  k: Keys,
  orgs: readonly OrgModel[],
  step: string,
): Promise<void> {
  await Promise.all(
    orgs.map(async (o) => {
      const scopes: Array<[string, Scope, string, string]> = [
        [`${o.name} org`, o.org, k.orgInflight(o.name), k.orgLog(o.name)],
        ...o.tokens.map((t): [string, Scope, string, string] => [
          `${o.name} token ${t}`,
          o.tok.get(t) as Scope,
          k.tokenInflight(o.name, t),
          k.tokenLog(o.name, t),
        ]),
      ];
      const keys = [
        ...scopes.flatMap(([, , inflight, log]) => [inflight, log]),
        k.policy(o.name),
        k.pace(o.name),
      ];
      const replies = (await redis.eval(
        DUMP,
        keys.length,
        ...keys,
        o.pace.size > 0 ? '1' : '0',
      )) as string[][];
      const reply = (i: number) => pairs(replies[i] ?? []);
      for (const [i, [label, s]] of scopes.entries()) {
        const zset = (j: number) => byKey(reply(j).map(([id, score]) => [id, Number(score)] as const));
        agree(step, `${label} in flight`, zset(2 * i), byKey(s.inflight));
        agree(step, `${label} log`, zset(2 * i + 1), byKey(s.log));
      }
      const paused = ([f, v]: readonly [string, string]) =>
        [f, f.startsWith('paused') ? 'paused' : v] as const;
      agree(
        step,
        `${o.name} policy`,
        byKey(
          reply(keys.length - 2)
            .filter(([f]) => MODELED.test(f))
            .map(paused),
        ),
        byKey([...o.policy].map(paused)),
      );
      // A tat as a number, to the µs it is stored with.
      const tats = reply(keys.length - 1).map(([f, v]): [string, number] => {
        const n = Number(v);
        const want = o.pace.get(f);
        return [f, want !== undefined && Math.abs(n - want) <= 1e-3 ? want : n];
      });
      agree(step, `${o.name} pace hash`, byKey(tats), byKey(o.pace));
    }),
  );
}
