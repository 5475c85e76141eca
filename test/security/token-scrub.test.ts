// Against a hostile Learner API that echoes the Bearer token it was sent (whole, across every cut length
// of the service's text, JSON-escaped, and in the list's 403), no token and no 8-character fragment of it
// may reach Redis (every key under the prefix, BullMQ's failedReason and stacktrace included), the logs or
// the report. Transfers go through real workers; the list error through the control worker.
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LearnerApiClient } from '../../src/api/client.ts';
import { MAX_RETRY_AFTER_MS } from '../../src/api/retry-after.ts';
import { loadConfig } from '../../src/core/config.ts';
import { writeReport } from '../../src/ops/views/report.ts';
import { openControlQueue, type ControlQueue } from '../../src/queue/control.ts';
import { PageWalker } from '../../src/queue/sources/page-walker.ts';
import { startControlWorker, type ControlHandle } from '../../src/worker/control-worker.ts';
import { runCommand } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { dumpPrefix } from '../helpers/redis.ts';
import { waitFor } from '../helpers/wait.ts';
import { buildDashboard } from '../../src/dashboard/server.ts';

const TOKEN = 'hzQ7vK2xWm9PLtR4bN8cY3dF6gJ1kS5uE0aXoVi'; // 40 characters, none of them ordinary text
const FRAGMENTS = Array.from({ length: TOKEN.length - 7 }, (_, i) => TOKEN.slice(i, i + 8));

/** The token's first character JSON-escaped (\u00XX): only a decoded read shows the token. */
const ESCAPED = `\\u${TOKEN.charCodeAt(0).toString(16).padStart(4, '0')}${TOKEN.slice(1)}`;

/** `n` filler characters, then the echoed token: it starts at offset n. */
const at = (n: number, token: string) => `${'x'.repeat(n)}${token} tail`;

function leaks(texts: readonly string[]): string[] {
  const found: string[] = [];
  for (const t of texts) {
    if (t.includes(TOKEN)) found.push(`whole token in: ${t.slice(0, 120)}`);
    for (const f of FRAGMENTS) if (t.includes(f)) found.push(`fragment ${f} in: ${t.slice(0, 120)}`);
  }
  return found;
}

interface Hostile {
  url: string;
  listRequests: number;
  /** What the list route answers: a 403 echoing the token, or a 429 with this Retry-After. */
  listMode: { kind: '403' } | { kind: '429'; retryAfter: string };
  close(): Promise<void>;
}

async function startHostile(): Promise<Hostile> {
  const state: Hostile = {
    url: '',
    listRequests: 0,
    listMode: { kind: '403' },
    close: async () => {},
  };
  const server: Server = createServer((req, res) => {
    const bearer = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    const url = new URL(req.url ?? '/', 'http://x');
    const json = (status: number, text: string) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(text);
    };
    if (req.method === 'GET' && url.pathname === '/1/learner') {
      state.listRequests++;
      if (state.listMode.kind === '429') {
        res.writeHead(429, { 'retry-after': state.listMode.retryAfter, 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'slow down', message: `token ${bearer} is rate limited` }));
        return;
      }
      json(403, JSON.stringify({ error: 'forbidden', message: `403 token ${bearer} may not list learners` }));
      return;
    }
    const m = /^\/1\/learner\/(\d+)\/transfer$/.exec(url.pathname);
    if (req.method === 'PATCH' && m) {
      const id = Number(m[1]);
      const j = (id % 39) + 1; // the cut falls j characters into the token: every j from 1 to 39
      switch (id % 4) {
        case 0: // final failure: error cut at 500, message at 1000
          json(403, JSON.stringify({ error: at(500 - j, bearer), message: at(1000 - j, bearer) }));
          return;
        case 1: // retried, then final: the same cuts, through BullMQ's retries
          json(500, JSON.stringify({ error: at(500 - j, bearer), message: at(1000 - j, bearer) }));
          return;
        case 2: // a 200 that is not JSON: its start (200) and its body go to the record and the audit
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end(at(200 - j, bearer).repeat(3));
          return;
        default: {
          // the token hidden behind a JSON escape, across both cuts
          const esc = bearer === TOKEN ? ESCAPED : bearer;
          json(400, `{"error":"${at(500 - j, esc)}","message":"${at(1000 - j, esc)}"}`);
          return;
        }
      }
    }
    json(404, '{"error":"not found"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return state;
}

let hostile: Hostile;
let h: Harness;
let scheduleDir: string;
let queue: ControlQueue;
let control: ControlHandle;

beforeAll(async () => {
  hostile = await startHostile();
  scheduleDir = mkdtempSync(join(tmpdir(), 'lt-sched-'));
  h = await startHarness({
    tag: 'sec-scrub',
    baseUrl: () => hostile.url,
    env: {
      LEARNER_API_TOKENS: `acme:${TOKEN}`,
      ATTEMPTS: '2',
      BACKOFF: '20ms',
      SCHEDULE_DIR: scheduleDir,
      // A hostile service fails most learners on purpose: the error budget would halt acme before the
      // answers this file scrubs had all come, so it is off here.
      HALT_AT: 'off',
    },
  });
  queue = openControlQueue(h.ctx.redis, h.ctx.keys);
  control = startControlWorker(h.ctx);
});

afterAll(async () => {
  await control?.close();
  await queue?.close();
  await h?.close();
  await hostile?.close();
});

async function controlJobFailed(name: string, desired: string) {
  const job = await queue.add(
    'reconcile',
    { kind: 'reconcile', scheduleId: name, desired, orgIds: { acme: 1 } },
    { attempts: 1 },
  );
  await waitFor(
    `control job ${name} to end (failed or completed)`,
    () => job.getState(),
    (state) => state === 'failed' || state === 'completed',
    { everyMs: 50 },
  );
  const done = await queue.getJob(job.id as string);
  return { failedReason: done?.failedReason ?? '', stacktrace: done?.stacktrace ?? [] };
}

describe('no token and no fragment of it survives a hostile service', () => {
  it('transfers through real workers and a reconcile through the control worker leave none in Redis, logs or the report', async () => {
    const ids = Array.from({ length: 80 }, (_, i) => i + 2);
    const { runId } = await h.enqueueIds(ids);
    await h.workUntilIdle({ concurrency: 4 });

    const desired = join(scheduleDir, 'nightly.csv');
    writeFileSync(desired, 'learnerId,org\n5,acme\n');
    const failed = await controlJobFailed('hostile-list', desired);
    expect(hostile.listRequests).toBeGreaterThan(0);
    // The list error reached BullMQ (it names the 403), with the token replaced.
    expect(failed.failedReason).toMatch(/forbidden/);
    expect(failed.failedReason).toContain('[Redacted]');
    expect(leaks([failed.failedReason, ...failed.stacktrace])).toEqual([]);

    // The outcomes carry the service's text, cut: the cuts happened, only after the scrub.
    const record = await h.ctx.store.get('acme', 4); // 4 % 4 === 0: the 403
    expect(record?.b).toBe('forbidden');
    // Learner 4: the token starts at 495; scrubbed whole first, the cut at 500 keeps only '[Reda'.
    expect(record?.e).toBe(`${'x'.repeat(495)}[Reda`);

    const reportFile = join(h.dir, 'report.csv');
    const rows = await writeReport(
      h.ctx.store,
      { orgs: ['acme'], runId },
      { format: 'csv', out: reportFile },
    );
    expect(rows).toBe(ids.length);
    const report = readFileSync(reportFile, 'utf8');
    expect(report).toContain('[Redacted]');

    const redis = await dumpPrefix(h.ctx.redis, h.prefix);
    expect(redis.length).toBeGreaterThan(100);
    expect(leaks(redis)).toEqual([]);
    expect(leaks(h.logLines)).toEqual([]);
    expect(leaks([report])).toEqual([]);

    // The dashboard's pages and JSON API, and bull-board's API, over the same state.
    const app = await buildDashboard(h.ctx);
    try {
      const pages: string[] = [];
      for (const url of [
        '/',
        '/api/overview',
        '/failures',
        '/failures?code=forbidden',
        `/failures?run=${encodeURIComponent(runId)}`,
        '/api/failures',
        '/api/failures?code=forbidden&limit=200',
        `/api/failures?run=${encodeURIComponent(runId)}&limit=200`,
        ...ids.slice(0, 12).flatMap((id) => [`/learners/acme/${id}`, `/api/learners/acme/${id}`]),
        `/api/learners?ids=${ids.map((id) => `acme:${id}`).join(',')}`,
        '/queues/api/queues?activeQueue=transfers-{acme}&status=failed&page=1',
        '/queues/api/queues?activeQueue=transfers-{acme}&status=completed&page=1',
      ]) {
        const res = await app.inject({ method: 'GET', url, headers: { host: '127.0.0.1' } });
        expect(res.statusCode, url).toBeLessThan(400);
        pages.push(res.body);
      }
      // What was scanned is real: the service's scrubbed words are on the pages.
      expect(pages.join('\n')).toContain('[Redacted]');
      expect(leaks(pages)).toEqual([]);
    } finally {
      await app.close();
    }
  });
});

describe('Retry-After on the list is capped', () => {
  for (const seconds of ['2000000', '3000000']) {
    it(`Retry-After: ${seconds} waits the cap (one day), and sends no second request at once`, async () => {
      hostile.listMode = { kind: '429', retryAfter: seconds };
      hostile.listRequests = 0;
      const client = new LearnerApiClient({
        baseUrl: hostile.url,
        userAgent: 'sec-test',
        requestTimeoutMs: 1000,
        connectTimeoutMs: 500,
      });
      const abort = new AbortController();
      const waits: number[] = [];
      const walker = new PageWalker({
        client,
        tokens: [TOKEN],
        concurrency: 1,
        signal: abort.signal,
        onPage: () => {},
        onRetry: (_page, _code, waitMs) => waits.push(waitMs),
      });
      const walking = walker.walk().catch((err: unknown) => err);
      await new Promise((r) => setTimeout(r, 1500));
      abort.abort(new Error('test over'));
      await walking;
      await client.close();
      hostile.listMode = { kind: '403' };
      // One request, then a wait of exactly the cap: not 23 days, not a timer overflowed to 1 ms.
      expect(hostile.listRequests).toBe(1);
      expect(waits).toEqual([MAX_RETRY_AFTER_MS]);
    });
  }
});

describe('SCHEDULE_DIR: control jobs read only inside it, and never quote a file', () => {
  it('the control worker refuses a file outside SCHEDULE_DIR, and a symlink inside that leads out', async () => {
    const outside = h.writeFile('worker.env', 'DB_PASSWORD=outsideSecretValue1\n');
    const direct = await controlJobFailed('outside', outside);
    expect(direct.failedReason).toMatch(/SCHEDULE_DIR/);
    expect(direct.failedReason).not.toContain('outsideSecretValue1');

    const link = join(scheduleDir, 'innocent.csv');
    symlinkSync(outside, link);
    const viaLink = await controlJobFailed('symlink', link);
    expect(viaLink.failedReason).toMatch(/refused.*SCHEDULE_DIR/);
    const traversal = await controlJobFailed('dotdot', join(scheduleDir, '..', 'x.csv'));
    expect(traversal.failedReason).not.toMatch(/completed/);
    expect(JSON.stringify(await dumpPrefix(h.ctx.redis, h.prefix))).not.toContain('outsideSecretValue1');
  });

  it('a bad file inside SCHEDULE_DIR fails with its name and line, never its cells', async () => {
    const bad = join(scheduleDir, 'bad.csv');
    writeFileSync(bad, 'API_KEY=insideSecretCell9,other\n');
    const failed = await controlJobFailed('bad-header', bad);
    expect(failed.failedReason).toContain('bad.csv:1: no learner id column');
    expect(failed.failedReason).not.toContain('insideSecretCell9');
    expect(JSON.stringify(failed.stacktrace)).not.toContain('insideSecretCell9');
  });

  it('the CLI refuses to schedule a file outside SCHEDULE_DIR, or any file when it is unset', async () => {
    const outside = h.writeFile('elsewhere.csv', 'learnerId,org\n5,acme\n');
    const args = ['schedule', '--every', '1h', 'reconcile', '--desired', outside, '--org-id', 'acme=1'];
    const refused = await runCommand(args, h.env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/refused: a scheduled reconcile reads only files inside SCHEDULE_DIR/);
    const { SCHEDULE_DIR: _unused, ...withoutDir } = h.env;
    const off = await runCommand(args, withoutDir);
    expect(off.code).not.toBe(0);
    expect(off.stderr).toContain('SCHEDULE_DIR is not set');
  });
});

describe('a Redis password is masked in a config error', () => {
  for (const url of [
    'http://:hunter2pass@host:6379',
    'redis//:hunter2pass@host',
    'redis://u:hunt/er2pass@h',
  ]) {
    it(`REDIS_URL=${url.replace(/hunt.*pass/, '...')}`, () => {
      let message = '';
      try {
        loadConfig({ REDIS_URL: url });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toContain('REDIS_URL');
      expect(message).toContain(':***@');
      expect(message).not.toMatch(/hunt|er2pass/);
    });
  }
});
