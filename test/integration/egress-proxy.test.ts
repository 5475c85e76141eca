// Egress as operators run it: a real forward proxy started here (CONNECT tunnels, Basic credentials), the
// simulator over HTTPS with a certificate of a throwaway private CA (openssl, as the Redis TLS tests make
// theirs), and real transfers by `work`'s own code (the harness) and by the client from a loaded config.
// The proxy records every request: a call through it shows as a CONNECT to the simulator's host, a host
// in NO_PROXY shows as nothing at all.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LearnerApiClient } from '../../src/api/client.ts';
import { loadConfig, secretsOf, type Env } from '../../src/core/config.ts';
import { createSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.ts';
import { startConnectProxy, type ConnectProxy } from '../helpers/connect-proxy.ts';
import { learnersNotIn, startHarness } from '../helpers/pipeline.ts';
import { dumpPrefix } from '../helpers/redis.ts';
import { waitUntil } from '../helpers/wait.ts';
import { startWorkers } from '../../src/worker/run-workers.ts';
import { makeTlsFiles, type TlsFiles } from '../helpers/redis-ha.ts';

const USER = 'egress-user';
// A password with characters a URL must escape: the masking and the scrub must see both forms.
const PASSWORD = 'Pr0xy-S3cret/with@odd';
const TOKEN = 'sim-acme-1';

let dir: string;
let tls: TlsFiles;
let proxy: ConnectProxy;
const open: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'lt-egress-'));
  // One CA; its one certificate (SAN localhost and 127.0.0.1) carries both serverAuth and clientAuth, so
  // the simulator serves it and the client presents it for mutual TLS.
  tls = makeTlsFiles(join(dir, 'tls'));
  proxy = await startConnectProxy({ user: USER, password: PASSWORD });
});

afterAll(async () => {
  for (const o of open.reverse()) await o.close().catch(() => {});
  await proxy.close();
  rmSync(dir, { recursive: true, force: true });
});

async function httpsSimulator(extra: Partial<SimulatorOptions['https']> = {}): Promise<Simulator> {
  const sim = createSimulator({
    learners: 60,
    https: { cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile), ...extra },
  });
  await sim.listen();
  open.push(sim);
  return sim;
}

/** The simulator under the name `localhost`: the proxied name (NO_PROXY below names 127.0.0.1 only). */
const viaLocalhost = (url: string) => url.replace('127.0.0.1', 'localhost');

function clientFor(baseUrl: string, env: Env): LearnerApiClient {
  const config = loadConfig({ LEARNER_API_BASE_URL: baseUrl, ...env });
  const client = new LearnerApiClient({
    baseUrl,
    userAgent: 'lt-egress-test',
    requestTimeoutMs: 3000,
    connectTimeoutMs: 1500,
    egress: config.egress,
  });
  open.push(client);
  return client;
}

const connectsTo = (port: number) =>
  proxy.seen.filter((r) => r.method === 'CONNECT' && r.target === `localhost:${port}`);

describe('through an HTTP proxy (CONNECT) to a simulator with a private CA', () => {
  it('work transfers every learner through the proxy, trusting LEARNER_API_TLS_CA, and never shows the password', async () => {
    const h = await startHarness({
      tag: 'egress',
      sim: {
        learners: 60,
        https: {
          cert: readFileSync(tls.certFile),
          key: readFileSync(tls.keyFile),
        },
      },
      baseUrl: viaLocalhost,
      env: {
        HTTPS_PROXY: proxy.url,
        NO_PROXY: '127.0.0.1,.internal.example',
        LEARNER_API_TLS_CA: tls.caFile,
        REQUEST_TIMEOUT: '3s',
        CONNECT_TIMEOUT: '1500ms',
      },
    });
    open.push(h);
    const port = Number(new URL(h.sim.url).port);
    const ids = learnersNotIn('acme', 6);
    await h.enqueueIds(ids);
    await h.workUntilIdle();

    // Every transfer reached the service and moved its learner.
    const transfers = h.sim.record.filter((r) => r.method === 'PATCH');
    expect(transfers.map((r) => r.learnerId).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(ids);
    expect(transfers.every((r) => r.status === 200)).toBe(true);
    for (const id of ids) expect(h.sim.learner(id)?.organizationId).toBe(1);
    // ...each through a tunnel the proxy opened, with the credentials of the URL.
    const tunnels = connectsTo(port);
    expect(tunnels.length).toBeGreaterThan(0);
    expect(tunnels.every((t) => t.accepted && t.user === USER)).toBe(true);

    // Said once at start, masked: which proxy, and what bypasses it.
    const start = h.logLines.filter((l) => l.includes('learner api egress'));
    expect(start).toHaveLength(1);
    expect(start[0]).toContain(`through the proxy http://${USER}:***@127.0.0.1:${proxy.port}`);
    expect(start[0]).toContain('NO_PROXY: 127.0.0.1,.internal.example');
    expect(start[0]).toContain(`LEARNER_API_TLS_CA ${tls.caFile}`);

    // The password is in no log line and in no Redis value, in either of its forms.
    expect(secretsOf(h.config)).toContain(PASSWORD);
    const dump = await dumpPrefix(h.ctx.redis, h.prefix);
    for (const text of [...h.logLines, ...dump]) {
      expect(text).not.toContain(PASSWORD);
      expect(text).not.toContain(encodeURIComponent(PASSWORD));
    }
  });

  it('without the private CA the same call is refused by TLS, after the tunnel opened', async () => {
    const sim = await httpsSimulator();
    const port = Number(new URL(sim.url).port);
    const client = clientFor(viaLocalhost(sim.url), { HTTPS_PROXY: proxy.url });
    const outcome = await client.transferLearner(learnersNotIn('acme', 1)[0]!, TOKEN);
    expect(outcome.code).toBe('network-error');
    if (outcome.code !== 'network-error') return;
    expect(outcome.errorCode).toMatch(/CERT|SIGNATURE|ISSUER/);
    expect(connectsTo(port).length).toBeGreaterThan(0);
    expect(sim.record).toHaveLength(0);
  });

  it('a host in NO_PROXY goes direct: the proxy sees nothing for it, and the CA still applies', async () => {
    const sim = await httpsSimulator();
    const port = Number(new URL(sim.url).port);
    const before = proxy.seen.length;
    const client = clientFor(sim.url, {
      https_proxy: proxy.url,
      no_proxy: `example.org, 127.0.0.1:${port}`,
      LEARNER_API_TLS_CA: tls.caFile,
    });
    const id = learnersNotIn('acme', 1)[0]!;
    const listed = await client.listLearners(1, TOKEN);
    expect(listed.ok).toBe(true);
    const outcome = await client.transferLearner(id, TOKEN);
    expect(outcome.code).toBe('transferred');
    expect(sim.record.map((r) => r.status)).toEqual([200, 200]);
    expect(proxy.seen.slice(before)).toEqual([]);
  });

  it('a wrong proxy password: LT_PROXY_TUNNEL naming the proxy masked, not sent, never the password', async () => {
    const sim = await httpsSimulator();
    const wrong = 'Wr0ng-Passw0rd-123';
    const url = `http://${USER}:${wrong}@127.0.0.1:${proxy.port}`;
    const client = clientFor(viaLocalhost(sim.url), { HTTPS_PROXY: url, LEARNER_API_TLS_CA: tls.caFile });
    const outcome = await client.transferLearner(learnersNotIn('acme', 1)[0]!, TOKEN);
    expect(outcome.code).toBe('network-error');
    if (outcome.code !== 'network-error') return;
    expect(outcome.errorCode).toBe('LT_PROXY_TUNNEL');
    // Nothing reached the service: the permit goes back (not counted against the window).
    expect(outcome.maybeDelivered).toBe(false);
    expect(outcome.message).toContain(`the proxy http://${USER}:***@127.0.0.1:${proxy.port} refused`);
    expect(outcome.message).toContain('407');
    expect(outcome.message).toContain('HTTPS_PROXY');
    expect(JSON.stringify(outcome)).not.toContain(wrong);
    expect(proxy.seen.at(-1)).toMatchObject({ method: 'CONNECT', accepted: false, user: USER });
    expect(sim.record).toHaveLength(0);
  });

  it('work with a wrong proxy password: the log says LT_PROXY_TUNNEL clearly, no learner fails or spends an attempt, no password anywhere', async () => {
    const wrong = 'Wr0ng-Work-Passw0rd';
    const h = await startHarness({
      tag: 'egress-407',
      sim: { learners: 60, https: { cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) } },
      baseUrl: viaLocalhost,
      env: {
        HTTPS_PROXY: `http://${USER}:${wrong}@127.0.0.1:${proxy.port}`,
        LEARNER_API_TLS_CA: tls.caFile,
      },
    });
    open.push(h);
    const ids = learnersNotIn('acme', 3);
    await h.enqueueIds(ids);
    const workers = startWorkers(h.ctx, { orgs: ['acme'], concurrency: 2, untilIdle: false });
    try {
      await waitUntil('a log line of the refused tunnel', () =>
        h.logLines.some((l) => l.includes('LT_PROXY_TUNNEL')),
      );
    } finally {
      await workers.stop();
      await workers.done;
    }
    const line = h.logLines.find((l) => l.includes('LT_PROXY_TUNNEL'))!;
    expect(line).toContain(`the proxy http://${USER}:***@127.0.0.1:${proxy.port} refused the tunnel`);
    expect(line).toContain('407');
    expect(h.sim.record).toHaveLength(0);
    // The learners wait (the service is unreachable this way), none failed, none used an attempt.
    for (const id of ids) {
      const record = await h.ctx.store.get('acme', id);
      expect(['queued', 'retrying'], `learner ${id}`).toContain(record?.b);
      expect(record?.a, `learner ${id}`).toBe(0);
      if (record?.e !== undefined) expect(record.e).toBe('LT_PROXY_TUNNEL');
    }
    const dump = await dumpPrefix(h.ctx.redis, h.prefix);
    for (const text of [...h.logLines, ...dump]) expect(text).not.toContain(wrong);
  });

  it('a proxy that never answers CONNECT: the call ends at CONNECT_TIMEOUT, as not sent', async () => {
    const sim = await httpsSimulator();
    proxy.hang(true);
    try {
      const client = clientFor(viaLocalhost(sim.url), {
        HTTPS_PROXY: proxy.url,
        LEARNER_API_TLS_CA: tls.caFile,
      });
      const started = performance.now();
      const o = await client.transferLearner(learnersNotIn('acme', 1)[0]!, TOKEN);
      const took = performance.now() - started;
      expect(o.code).toBe('network-error');
      if (o.code !== 'network-error') return;
      expect(o.errorCode).toBe('LT_PROXY_TUNNEL');
      expect(o.maybeDelivered).toBe(false);
      expect(o.message).toContain('did not answer the tunnel request');
      // CONNECT_TIMEOUT of 1.5 s here: not undici's 300 s default for the proxy's answer.
      expect(took).toBeGreaterThan(1400);
      expect(took).toBeLessThan(2900);
      expect(sim.record).toHaveLength(0);
    } finally {
      proxy.hang(false);
    }
  });
});

describe('mutual TLS: LEARNER_API_TLS_CERT and LEARNER_API_TLS_KEY', () => {
  it('a simulator that requires a client certificate refuses a client without one and serves one with it, through the proxy', async () => {
    const sim = await httpsSimulator({ ca: readFileSync(tls.caFile), requestCert: true });
    const base = viaLocalhost(sim.url);
    const id = learnersNotIn('acme', 1)[0]!;
    const env = { HTTPS_PROXY: proxy.url, LEARNER_API_TLS_CA: tls.caFile };

    const without = await clientFor(base, env).transferLearner(id, TOKEN);
    expect(without.code).toBe('network-error');
    expect(sim.record).toHaveLength(0);

    const withCert = await clientFor(base, {
      ...env,
      LEARNER_API_TLS_CERT: tls.certFile,
      LEARNER_API_TLS_KEY: tls.keyFile,
    }).transferLearner(id, TOKEN);
    expect(withCert.code).toBe('transferred');
    expect(sim.record.map((r) => r.status)).toEqual([200]);
    expect(connectsTo(Number(new URL(sim.url).port)).length).toBeGreaterThanOrEqual(2);
  });

  it('direct (no proxy) too', async () => {
    const sim = await httpsSimulator({ ca: readFileSync(tls.caFile), requestCert: true });
    const id = learnersNotIn('acme', 1)[0]!;
    const without = await clientFor(sim.url, { LEARNER_API_TLS_CA: tls.caFile }).transferLearner(id, TOKEN);
    expect(without.code).toBe('network-error');
    const withCert = await clientFor(sim.url, {
      LEARNER_API_TLS_CA: tls.caFile,
      LEARNER_API_TLS_CERT: tls.certFile,
      LEARNER_API_TLS_KEY: tls.keyFile,
    }).transferLearner(id, TOKEN);
    expect(withCert.code).toBe('transferred');
    expect(sim.record.map((r) => r.status)).toEqual([200]);
  });
});
