// `audit --out` (exportAudit): a file an auditor reads alone. Every line names its kind; a transfer that
// may repeat one whose answer was lost says so with the reason (from the causes finish-attempt.lua keeps),
// whether the repeat answered 200 (its body is the entry) or 400 (an entry of its own); an entry flagged by
// the previous release, which kept no cause, still says it.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/core/keys.ts';
import { exportAudit } from '../../src/ops/audit/export.ts';
import { OutcomeStore, type FinishArgs } from '../../src/outcomes/store.ts';
import { deletePrefix, newRedis, randomPrefix } from '../helpers/redis.ts';

const redis = newRedis();
const prefix = randomPrefix('auditx');
const keys = createKeys(prefix);
const store = new OutcomeStore(redis, keys);
const dir = mkdtempSync(join(tmpdir(), 'lt-audit-'));
const ORG = 'acme';
let n = 0;

afterAll(async () => {
  await deletePrefix(redis, prefix);
  await redis.quit();
  rmSync(dir, { recursive: true, force: true });
});

type Update = NonNullable<FinishArgs['update']>;
const finish = (learnerId: number, update: Update, audit?: FinishArgs['audit']) =>
  store.finish({
    org: ORG,
    learnerId,
    runId: 'run-a',
    at: Date.now(),
    attemptId: `a-${++n}`,
    update,
    ...(audit ? { audit } : {}),
  });
const lost: Update = { b: 'retrying', c: 'network-error', e: 'ECONNRESET', d: 900, n: 1 };
const repeat = (s: 200 | 400): Update => ({ b: 'already-in-org', c: 'already-in-org', s, d: 9, n: 1 });
const body = (learnerId: number, transferId: string) =>
  JSON.stringify({ success: true, data: { learnerId, authorizations: { revoked: [] }, transferId } });

describe('audit export', () => {
  it('flags every possible repeat with its reason, and only those', async () => {
    await store.markQueued(
      [1, 2, 3].map((learnerId) => ({ org: ORG, learnerId, runId: 'run-a', source: 't', force: false })),
    );
    // 1: transferred, its answer on record.
    await finish(
      1,
      { b: 'transferred', c: 'transferred', s: 200, x: 'T1', d: 10, n: 1, ok: 1 },
      {
        key: 't:T1',
        transferId: 'T1',
        raw: body(1, 'T1'),
        kind: 'transfer',
      },
    );
    // 2: no answer (a SIGKILL with the answer on the wire), then a 200 repeat.
    await finish(2, lost);
    await finish(
      2,
      { ...repeat(200), ok: 1 },
      { key: 'a:2', transferId: '', raw: body(2, 'T2'), kind: 'transfer' },
    );
    // 3: no answer, then the 400 "already associated".
    await finish(3, lost);
    await finish(3, repeat(400));
    // 4: flagged by the previous release (no cause kept).
    await redis.xadd(
      keys.audit(ORG),
      '*',
      'learnerId',
      '4',
      'runId',
      'old',
      'transferId',
      '',
      'kind',
      'transfer',
      'at',
      '1',
      'raw',
      body(4, 'T4'),
      'possibleRepeat',
      '1',
    );

    const out = join(dir, 'audit.ndjson');
    const written = await exportAudit(store, { orgs: [ORG] }, out);
    const all = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(all).toHaveLength(written);
    // The story entries of the records that ended final go to the file too (kind 'record').
    const lines = all.filter((l) => l.kind !== 'record');
    expect(lines).toHaveLength(4);
    expect(all.filter((l) => l.kind === 'record').length).toBeGreaterThan(0);
    const of = (id: number) => lines.find((l) => l.learnerId === id);

    expect(of(1)).toMatchObject({ kind: 'transfer', transferId: 'T1' });
    expect(of(1)).not.toHaveProperty('possibleRepeat');
    expect(of(2)).toMatchObject({ kind: 'transfer', possibleRepeat: true });
    expect(of(2)?.possibleRepeatReason).toMatch(
      /^the learner was already in the organization after an earlier attempt got no answer/,
    );
    expect(of(2)?.possibleRepeatReason).toMatch(/authorizations it revoked are not on record$/);
    expect(of(3)).toMatchObject({ kind: 'possible-repeat', possibleRepeat: true, result: null });
    expect(of(3)?.possibleRepeatReason).toContain('got no answer');
    expect(of(4)).toMatchObject({ kind: 'transfer', possibleRepeat: true });
    expect(of(4)?.possibleRepeatReason).toContain('kept no more');
    expect(lines.filter((l) => l.possibleRepeat === true).map((l) => l.learnerId)).toEqual([2, 3, 4]);
  });
});
