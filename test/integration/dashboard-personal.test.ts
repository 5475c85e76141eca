// Personal data on the dashboard (issue 47): the viewer token (DASHBOARD_READ_TOKEN) sees the counts,
// roles and user ids of the authorizations a transfer revoked, never an e-mail address or a name, on the
// pages and in the JSON API alike; the operator sees them. `audit --out --redact` writes without them.
// Real Redis and simulator, fastify inject.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { exportAudit } from '../../src/ops/audit/export.ts';
import { bearer, failureScenario, TRANSFERRED, type Scenario } from '../helpers/dashboard.ts';

const READ_TOKEN = 'view-only-personal-0123456789';
const viewer = { authorization: `Bearer ${READ_TOKEN}` };

let s: Scenario;
let app: FastifyInstance;
/** What the simulator revoked for the transferred learners: [learnerId, authorizations]. */
let revoked: [number, { userId: number; email: string; name: string; role: string }[]][];
const tmp = mkdtempSync(join(tmpdir(), 'lt-personal-'));

beforeAll(async () => {
  s = await failureScenario({ env: { DASHBOARD_READ_TOKEN: READ_TOKEN } });
  app = await buildDashboard(s.h.ctx, {});
  revoked = TRANSFERRED.map((id) => [
    id,
    s.h.sim.transfersOf(id).flatMap((t) => t.data.authorizations.revoked),
  ]);
});
afterAll(async () => {
  await app?.close();
  await s?.h.close();
  rmSync(tmp, { recursive: true, force: true });
});

const people = () => revoked.flatMap(([, list]) => list);

describe('personal data of the revoked authorizations', () => {
  it('the transferred learners revoked some authorizations (else this test would prove nothing)', () => {
    expect(people().length).toBeGreaterThan(0);
  });

  it('the viewer sees counts, roles and user ids on the learner page, never an e-mail or a name', async () => {
    for (const [id, list] of revoked) {
      const r = await app.inject({ url: `/learners/acme/${id}`, headers: viewer });
      expect(r.statusCode).toBe(200);
      expect(r.body).toContain(`authorizations revoked</b> (${list.length})`);
      for (const a of list) {
        expect(r.body).toContain(`user ${a.userId}`);
        expect(r.body).toContain(`(${a.role})`);
        expect(r.body).not.toContain(a.email);
        expect(r.body).not.toContain(a.name);
      }
      expect(r.body).not.toMatch(/@example\.test/);
      if (list.length > 0) expect(r.body).toContain('data-personal-hidden');
    }
  });

  it('the viewer gets no e-mail or name in the JSON API, but the authorizations with ids and roles', async () => {
    for (const [id, list] of revoked) {
      const r = await app.inject({ url: `/api/learners/acme/${id}`, headers: viewer });
      expect(r.statusCode).toBe(200);
      expect(r.body).not.toMatch(/@example\.test/);
      for (const a of list) expect(r.body).not.toContain(a.name);
      const body = r.json<{
        audit: { kind: string; result: { authorizations: { revoked: unknown[] } } }[];
      }>();
      const entry = body.audit.find((e) => e.kind === 'transfer');
      expect(entry?.result.authorizations.revoked).toEqual(
        list.map((a) => expect.objectContaining({ userId: a.userId, role: a.role })),
      );
      for (const a of entry?.result.authorizations.revoked ?? []) {
        expect(a).not.toHaveProperty('email');
        expect(a).not.toHaveProperty('name');
      }
    }
  });

  it('the operator sees every e-mail address and name, on the page and in the JSON API', async () => {
    for (const [id, list] of revoked) {
      const page = await app.inject({ url: `/learners/acme/${id}`, headers: bearer });
      const api = await app.inject({ url: `/api/learners/acme/${id}`, headers: bearer });
      for (const a of list) {
        expect(page.body).toContain(a.email);
        expect(page.body).toContain(a.name);
        expect(api.body).toContain(a.email);
        expect(api.body).toContain(a.name);
      }
    }
  });

  it('audit --redact writes every entry without e-mail or name; without it, they are there', async () => {
    const src = { stream: s.h.ctx.store.auditStream() };
    const whole = join(tmp, 'audit.ndjson');
    const redacted = join(tmp, 'audit-redacted.ndjson');
    const n = await exportAudit(src, { orgs: ['acme'] }, whole);
    const m = await exportAudit(src, { orgs: ['acme'] }, redacted, process.stdout, { redact: true });
    expect(m).toBe(n);
    const text = readFileSync(redacted, 'utf8');
    const full = readFileSync(whole, 'utf8');
    for (const a of people()) {
      expect(full).toContain(a.email);
      expect(text).not.toContain(a.email);
      expect(text).not.toContain(a.name);
      expect(text).toContain(`"userId":${a.userId}`);
    }
    // Line for line the same entries, with the same counts of revoked authorizations.
    const count = (t: string) =>
      t
        .split('\n')
        .filter(Boolean)
        .map((l) => {
          const e = JSON.parse(l) as {
            auditId: string;
            result?: { authorizations?: { revoked?: unknown[] } };
          };
          return [e.auditId, e.result?.authorizations?.revoked?.length ?? null];
        });
    expect(count(text)).toEqual(count(full));
  });
});
