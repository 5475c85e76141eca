// Credentials and TLS in every Redis mode, through the real CLI: a standalone server over TLS
// (rediss:// + REDIS_TLS_CA) and in plain text with the password in REDIS_URL, a Redis Cluster with
// REDIS_USERNAME + REDIS_PASSWORD + REDIS_TLS + REDIS_TLS_CA, and Sentinel with REDIS_PASSWORD +
// REDIS_SENTINEL_PASSWORD + TLS to the master and to the sentinels. In each: `enqueue`, `work --until-idle`
// (against the simulator) and `status` succeed; a wrong password (or user name) fails with an error that
// names the variable and never shows a password; no password or token lands in Redis. Bad values of the Redis variables name the variable and
// hide the password. The topologies are the run's shared ones (topologies.ts: one standalone server and
// one Cluster that listen in TLS and in plain text with a password, one Sentinel setup over TLS with
// passwords), each mode under its own random prefix; the shared Redis is only scanned for this run's
// random prefixes, which must not be there.
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it, type ExpectStatic } from 'vitest';
import { loadConfig } from '../../src/core/config.ts';
import { ConfigError } from '../../src/core/errors.ts';
import { type CliResult, runCommand } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { dumpPrefix, REDIS_URL } from '../helpers/redis.ts';
import {
  keysEverywhere,
  scanWhole,
  useTopologies,
  type ClusterInfo,
  type SentinelInfo,
  type StandaloneInfo,
  type TopologyName,
} from '../helpers/topologies.ts';

const topologies = useTopologies();
const hex = () => randomBytes(6).toString('hex');

/** A password as it may appear anywhere: as is, and percent-encoded (as in a URL). */
function forms(secret: string): string[] {
  return [...new Set([secret, encodeURIComponent(secret)])];
}

interface WrongCase {
  /** The variable that holds the bad credential: the error must name it. */
  variable: string;
  /** The wrong credential given: it must not be shown either. */
  wrong: string;
  /** What replaces the working environment's variables. */
  env: Record<string, string>;
}

interface Mode {
  name: string;
  tag: string;
  topology: TopologyName;
  /** Also `work --until-idle` (the plain-text standalone server skips it: the TLS one runs the same code). */
  work: boolean;
  /** From the topology's description: the environment that reaches it, the wrong-password cases. */
  start(info: unknown): {
    env: Record<string, string>;
    wrong: WrongCase[];
    /** The passwords it needs, all of which must stay hidden. */
    passwords: string[];
  };
}

/** The variable itself set to a wrong password (cluster and Sentinel modes). */
function wrongCase(variable: string, wrong: string): WrongCase {
  return { variable, wrong, env: { [variable]: wrong } };
}

/** The standalone server reached by `env` at `url`; the wrong case is that URL with another password. */
function standaloneCase(
  s: StandaloneInfo,
  url: string,
  env: Record<string, string>,
): ReturnType<Mode['start']> {
  const wrong = `Wrong/url+${hex()}`;
  // A password a URL must percent-encode: the CLI must decode it, and hide both forms.
  if (encodeURIComponent(s.password) === s.password)
    throw new Error('the standalone password needs no encoding');
  return {
    env: { REDIS_URL: url, ...env },
    wrong: [
      {
        variable: 'REDIS_URL',
        wrong,
        env: { REDIS_URL: url.replace(encodeURIComponent(s.password), encodeURIComponent(wrong)) },
      },
    ],
    passwords: [s.password],
  };
}

const MODES: Mode[] = [
  {
    name: 'standalone over TLS (rediss:// with the password, REDIS_TLS_CA)',
    tag: 'auth-tls-sa',
    topology: 'standalone',
    work: true,
    start(info) {
      const s = info as StandaloneInfo;
      if (!s.url.startsWith('rediss://'))
        throw new Error(`the TLS standalone server has a ${s.url.split(':')[0]}:// URL`);
      return standaloneCase(s, s.url, { REDIS_TLS_CA: s.caFile });
    },
  },
  {
    name: 'standalone in plain text (redis:// with the password)',
    tag: 'auth-plain-sa',
    topology: 'standalone',
    work: false,
    start(info) {
      const s = info as StandaloneInfo;
      if (!s.plainUrl.startsWith('redis://'))
        throw new Error(`the plain standalone server has a ${s.plainUrl.split(':')[0]}:// URL`);
      return standaloneCase(s, s.plainUrl, {});
    },
  },
  {
    name: 'Redis Cluster with REDIS_PASSWORD and TLS',
    tag: 'auth-tls-cl',
    topology: 'cluster',
    work: true,
    start(info) {
      const c = info as ClusterInfo;
      return {
        env: {
          // The TLS ports (the same nodes' plain-text ports are other files').
          REDIS_CLUSTER_NODES: c.seeds,
          // The ACL user `requirepass` sets: AUTH with a user name (a wrong one is refused below).
          REDIS_USERNAME: 'default',
          REDIS_PASSWORD: c.password,
          REDIS_TLS: 'true',
          REDIS_TLS_CA: c.caFile,
        },
        wrong: [
          wrongCase('REDIS_PASSWORD', `Wrong-data-${hex()}`),
          wrongCase('REDIS_USERNAME', `nobody-${hex()}`),
        ],
        passwords: [c.password],
      };
    },
  },
  {
    name: 'Sentinel with REDIS_PASSWORD, REDIS_SENTINEL_PASSWORD and TLS',
    tag: 'auth-tls-se',
    topology: 'sentinel-tls',
    work: true,
    start(info) {
      const s = info as SentinelInfo;
      if (!s.password || !s.sentinelPassword || !s.caFile)
        throw new Error('the TLS Sentinel setup has no password, sentinel password or CA');
      return {
        env: {
          REDIS_SENTINELS: s.sentinels,
          REDIS_SENTINEL_MASTER: s.masterName,
          REDIS_PASSWORD: s.password,
          REDIS_SENTINEL_PASSWORD: s.sentinelPassword,
          REDIS_TLS: 'true',
          REDIS_TLS_CA: s.caFile,
        },
        wrong: [
          wrongCase('REDIS_PASSWORD', `Wrong-data-${hex()}`),
          wrongCase('REDIS_SENTINEL_PASSWORD', `Wrong-sentinel-${hex()}`),
        ],
        passwords: [s.password, s.sentinelPassword],
      };
    },
  },
];

interface Live {
  h: Harness;
  wrong: WrongCase[];
}

const live = new Map<string, Live>();
/** Every secret of the run: the passwords (all forms), the API tokens. Set in beforeAll. */
let secrets: string[] = [];

function expectNoSecret(expect: ExpectStatic, text: string, where: string, extra: string[] = []): void {
  for (const s of [...secrets, ...extra.flatMap(forms)]) {
    expect(text, `${where} shows a secret (${s.slice(0, 9)}...)`).not.toContain(s);
  }
}

/** The CLI's output, both streams. */
const output = (r: CliResult) => `${r.stdout}\n${r.stderr}`;

beforeAll(async () => {
  const passwords: string[] = [];
  const started = await Promise.allSettled(
    MODES.map(async (m) => {
      const t = m.start(await topologies(m.topology, 'describe'));
      passwords.push(...t.passwords);
      const h = await startHarness({ tag: m.tag, redisEnv: t.env, env: { LOG_LEVEL: 'info' } });
      live.set(m.name, { h, wrong: t.wrong });
    }),
  );
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  const tokens = (live.values().next().value as Live).h.config.tokens.map((t) => t.secret);
  secrets = [...passwords, ...tokens].flatMap(forms);
}, 90_000);

afterAll(async () => {
  await Promise.all([...live.values()].map((l) => l.h.close()));
}, 30_000);

/** The wrong-password runs, once each (two tests read each result). */
const wrongRuns = new Map<string, Promise<CliResult>>();
function runWrong(mode: string, w: WrongCase): Promise<CliResult> {
  const key = `${mode}/${w.variable}`;
  let run = wrongRuns.get(key);
  if (!run) {
    const { h } = live.get(mode) as Live;
    // `status` connects first: nothing else happens without Redis. A refusal stops it at once, so the
    // timeout only bounds a broken case; it is long enough for a TLS handshake on a busy machine.
    run = runCommand(['status'], { ...h.env, ...w.env, REDIS_CONNECT_TIMEOUT: '20s' }, 90_000);
    wrongRuns.set(key, run);
  }
  return run;
}

describe.concurrent('credentials and TLS in every Redis mode, through the CLI', () => {
  for (const mode of MODES) {
    describe(mode.name, () => {
      it(`enqueue${mode.work ? ', work --until-idle' : ''} and status succeed; no password or token in their output or in Redis`, async ({
        expect,
      }) => {
        const { h } = live.get(mode.name) as Live;
        const ids = learnersNotIn('acme', 6);
        const csv = h.writeFile('cohort.csv', `learner_id\n${ids.join('\n')}\n`);
        const runs: [string, CliResult][] = [];

        const enqueue = await runCommand(['enqueue', '--csv', csv, '--org', 'acme', '--quiet'], h.env);
        runs.push(['enqueue', enqueue]);
        expect(enqueue.code, enqueue.stderr.slice(-2000)).toBe(0);
        expect(enqueue.stdout).toContain(`enqueued   ${ids.length}`);

        if (mode.work) {
          const work = await runCommand(['work', '--until-idle', '--concurrency', '3'], h.env);
          runs.push(['work', work]);
          expect(work.code, work.stderr.slice(-2000)).toBe(0);
          expect(work.stderr).toContain(`${ids.length} succeeded, 0 failed`);
          expect(h.sim.record.filter((r) => r.effectApplied).length).toBe(ids.length);
        }

        const status = await runCommand(['status'], h.env);
        runs.push(['status', status]);
        expect(status.code, status.stderr.slice(-2000)).toBe(0);
        expect(status.stdout).toMatch(
          new RegExp(`acme\\n\\s+learners: ${mode.work ? 'transferred' : 'queued'} ${ids.length}\\b`),
        );

        for (const [what, r] of runs) {
          expect(r.stderr, what).not.toMatch(/unexpected error|Unhandled error event/);
          expectNoSecret(expect, output(r), `the output of ${what}`);
        }
        expectNoSecret(expect, h.logLines.join('\n'), 'the in-process log');

        // Every key and value of the run, on every master of the topology.
        const dump = await dumpPrefix(h.ctx.redis, h.prefix);
        expect(dump.length, 'keys and values under the prefix').toBeGreaterThan(20);
        expectNoSecret(expect, dump.join('\n'), `Redis (under ${h.prefix})`);

        // Nothing of the run reached the shared Redis (scanned for this prefix only) or another topology.
        expect(await scanWhole(REDIS_URL, undefined, `${h.prefix}*`), `keys at ${REDIS_URL}`).toEqual([]);
        const where = await keysEverywhere(topologies, `${h.prefix}*`);
        expect(where[mode.topology]?.length ?? 0, `keys on ${mode.topology}`).toBeGreaterThan(0);
        for (const [name, keys] of Object.entries(where))
          if (name !== mode.topology) expect(keys, `keys on ${name}`).toEqual([]);
        // Four topologies at once, each with its CLI processes: on two busy cores (the rest of the suite
        // runs beside this file) one mode's enqueue + work + status can take over a minute.
      }, 150_000);

      it('a wrong password fails (non-zero exit) and no password is shown', async ({ expect }) => {
        const { wrong } = live.get(mode.name) as Live;
        expect(wrong.length).toBeGreaterThan(0);
        for (const w of wrong) {
          const r = await runWrong(mode.name, w);
          const text = output(r);
          expect(r.code, `${w.variable}: ${r.stderr.slice(-1500)}`).not.toBe(0);
          expect(r.code, `${w.variable}: the CLI was killed, it did not exit`).not.toBeNull();
          expect(r.stderr).toMatch(/^learner-transfer: /m);
          expect(r.stderr).not.toMatch(/unexpected error/);
          // It points at Redis's configuration...
          expect(r.stderr).toMatch(/REDIS_(URL|CLUSTER_NODES|SENTINELS|PASSWORD|SENTINEL_PASSWORD)\b/);
          // ...and shows neither the wrong password nor the right one.
          expectNoSecret(expect, text, `the output with a wrong ${w.variable}`, [w.wrong]);
        }
      }, 120_000);

      it('a wrong password: the error names the variable and says the credentials were refused', async ({
        expect,
      }) => {
        const { wrong } = live.get(mode.name) as Live;
        for (const w of wrong) {
          const r = await runWrong(mode.name, w);
          const message = r.stderr
            .split('\n')
            .filter((l) => l.startsWith('learner-transfer: '))
            .join('\n');
          expect(message, r.stderr.slice(-1500)).toMatch(new RegExp(`\\b${w.variable}\\b`));
          expect(message).toMatch(/refused|WRONGPASS|NOAUTH/);
          // Not "did not answer": Redis answered, and waiting longer will not help.
          expect(message).not.toMatch(/did not answer/);
          // A bad configuration (exit 3), as any other bad variable.
          expect(r.code).toBe(3);
          expect(r.stderr).not.toMatch(/Unhandled error event/);
        }
      }, 120_000);
    });
  }

  it('a bad value of a Redis variable names it, and never shows a password', async ({ expect }) => {
    const pw = `Cfg-${hex()}`;
    // A token: status without any says which to set before it connects (its own exit 3, tested elsewhere).
    const base = {
      QUEUE_PREFIX: `lt-test-auth-cfg-${hex()}`,
      REDIS_PASSWORD: pw,
      LEARNER_API_TOKENS: 'acme:auth-cfg-token-1',
    };
    const hidden = (text: string, what: string) => {
      expect(text, `${what}: the password is shown`).not.toContain(pw);
      expect(text, `${what}: part of the password is shown`).not.toContain(pw.slice(4));
    };
    // Through the CLI (exit 3, one line per problem on stderr): the examples, and a CA file that
    // is not there (found when connecting, still a configuration error).
    const cli: { env: Record<string, string>; variables: string[]; shows: string[] }[] = [
      { env: { REDIS_CLUSTER_NODES: `a:${pw}@x` }, variables: ['REDIS_CLUSTER_NODES'], shows: [] },
      {
        env: { REDIS_URL: `http://:${pw}@127.0.0.1:6379`, REDIS_TLS: 'maybe' },
        variables: ['REDIS_URL', 'REDIS_TLS'],
        shows: ["'http://:***@127.0.0.1:6379'", "'maybe'"],
      },
      {
        env: {
          REDIS_CLUSTER_NODES: '127.0.0.1:1',
          REDIS_TLS: 'true',
          REDIS_TLS_CA: join(tmpdir(), `lt-no-such-ca-${hex()}.pem`),
        },
        variables: ['REDIS_TLS_CA'],
        shows: ['lt-no-such-ca-', 'ENOENT'],
      },
    ];
    const results = await Promise.all(cli.map((c) => runCommand(['status'], { ...base, ...c.env }, 30_000)));
    cli.forEach((c, i) => {
      const r = results[i] as CliResult;
      const what = c.variables.join(' + ');
      expect(r.code, `${what}: ${r.stderr.replaceAll(pw, '<pw>')}`).toBe(3);
      expect(r.stderr, what).toMatch(/^learner-transfer: /);
      expect(r.stderr, what).not.toMatch(/unexpected error/);
      for (const v of c.variables) expect(r.stderr, what).toMatch(new RegExp(`\\b${v}\\b`));
      for (const s of c.shows) expect(r.stderr, what).toContain(s);
      hidden(output(r), what);
    });

    // More shapes, in process: the same messages (loadConfig's ConfigError).
    const more: { env: Record<string, string>; variable: string; shows?: string }[] = [
      {
        env: { REDIS_CLUSTER_NODES: `127.0.0.1:7000,user:${pw}@10.0.0.2:7000` },
        variable: 'REDIS_CLUSTER_NODES',
      },
      {
        env: { REDIS_SENTINELS: `u:${pw}@10.0.0.1:26379`, REDIS_SENTINEL_MASTER: 'ltmaster' },
        variable: 'REDIS_SENTINELS',
      },
      // No scheme separator: the URL does not parse, the password is hidden all the same.
      { env: { REDIS_URL: `redis//user:${pw}@127.0.0.1:6379` }, variable: 'REDIS_URL', shows: 'user:***@' },
      // A password with an @ in it.
      {
        env: { REDIS_URL: `ftp://user:${pw}@x@127.0.0.1` },
        variable: 'REDIS_URL',
        shows: 'user:***@127.0.0.1',
      },
    ];
    for (const c of more) {
      let message = '';
      try {
        loadConfig({ ...base, ...c.env });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        message = (err as Error).message;
      }
      expect(message, c.variable).toMatch(new RegExp(`\\b${c.variable}\\b`));
      if (c.shows) expect(message, c.variable).toContain(c.shows);
      hidden(message, c.variable);
    }
  });
});
