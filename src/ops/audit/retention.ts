// The retention of personal data in the audit (AUDIT_PERSONAL_RETENTION, docs/personal-data.md): `work`
// archives the streams, then redacts the day files past the cut-off, once per archive directory an
// hour; each process also deletes its own old bodies beside the spool.
import type { Keys } from '../../core/keys.ts';
import type { Logger } from '../../core/log.ts';
import type { RedisClient } from '../../redis/client.ts';
import { appendChange, workActor } from '../../limiter/control-log.ts';
import { AuditStream, idTime } from '../../outcomes/audit-stream.ts';
import { AuditArchiver } from './archive.ts';
import { dayOfMs } from './archive-file.ts';
import { archiveDiskId } from './archive-note.ts';
import { redactStoredFields, type Removal } from './redact.ts';
import { archivedOrgs, dayFilesOf, notedFile, rewriteDayFile, type EntryChange } from './rewrite.ts';

/** How often `work` looks for personal data past the retention (and how long one turn lasts). */
export const PERSONAL_RETENTION_INTERVAL_MS = 60 * 60 * 1000;

/** The bodies kept beside this process's spool (worker/body-archive.ts). */
export interface KeptBodies {
  /** Deletes those whose newest answer came before `cutoffMs`; how many. */
  removeBefore(cutoffMs: number): Promise<number>;
}

export interface PersonalRetentionDeps {
  redis: RedisClient;
  keys: Keys;
  dir: string;
  /** The organizations whose streams are archived first. */
  orgs: readonly string[];
  logger?: Logger | undefined;
  /** This process's kept bodies; none: not looked at. */
  bodies?: KeptBodies | undefined;
}

export type PersonalRetentionResult =
  | { kind: 'locked'; bodies: number }
  | { kind: 'done'; entries: number; files: number; skipped: string[]; leftInRedis: number; bodies: number };

/** A retention in words: 180d, 12h, 90m, or ms. */
export function retentionText(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const)
    if (ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `fn` under the archiver's lease, waiting up to 10 s for another holder; undefined if it never came. */
async function leased<T>(archiver: AuditArchiver, fn: (renew: () => Promise<void>) => Promise<T>) {
  for (let i = 0; i < 20; i++) {
    const r = await archiver.withLease(fn);
    if (r !== undefined) return r;
    await sleep(500);
  }
  return undefined;
}

/** Stream entries older than the cut-off that still hold personal data (their archive failed). */
async function leftInRedis(deps: PersonalRetentionDeps, cutoff: number, removal: Removal): Promise<number> {
  const stream = new AuditStream(deps.redis, deps.keys);
  let n = 0;
  for (const org of deps.orgs) {
    let after = '';
    for (;;) {
      const batch = await stream.read(org, after, String(cutoff - 1), 1000);
      for (const e of batch) if (redactStoredFields(e.fields, { removal })) n++;
      if (batch.length < 1000) break;
      after = (batch[batch.length - 1] as { id: string }).id;
    }
  }
  return n;
}

/**
 * One pass, if this archive directory's turn is free: archives the streams, then removes the e-mail
 * addresses and names of the entries written before `now - retentionMs` from the day files.
 */
export async function removeOldPersonalData(
  deps: PersonalRetentionDeps,
  retentionMs: number,
  options: { now?: number; intervalMs?: number; archiver?: AuditArchiver } = {},
): Promise<PersonalRetentionResult> {
  const now = options.now ?? Date.now();
  const cutoff = now - retentionMs;
  const removal = { at: new Date(now).toISOString(), why: `retention ${retentionText(retentionMs)}` };
  // This process's kept bodies, whoever has the archive's turn: the spool is this host's own.
  const bodies = (await deps.bodies?.removeBefore(cutoff)) ?? 0;
  const disk = await archiveDiskId(deps.dir);
  const turnKey = deps.keys.auditRetentionTurn(disk);
  const intervalMs = options.intervalMs ?? PERSONAL_RETENTION_INTERVAL_MS;
  if ((await deps.redis.set(turnKey, String(now), 'PX', intervalMs, 'NX')) !== 'OK') {
    await logPass(deps, { entries: 0, files: 0, skipped: [], leftInRedis: 0, bodies }, removal, cutoff);
    return { kind: 'locked', bodies };
  }
  const archiver =
    options.archiver ?? new AuditArchiver(deps.redis, deps.keys, { dir: deps.dir, logger: deps.logger });
  const change: EntryChange = (e) => {
    if (idTime(e.auditId) >= cutoff) return undefined;
    const r = redactStoredFields(e.fields, { removal });
    return r ? { ...e, fields: r.fields } : undefined;
  };
  const stream = new AuditStream(deps.redis, deps.keys);
  // Archived first (nothing leaves Redis before it is in a day file), waiting a little for the lease.
  let archivedFirst = await archiver.runOnce(deps.orgs);
  for (let i = 0; !archivedFirst.ran && i < 20; i++) {
    await sleep(500);
    archivedFirst = await archiver.runOnce(deps.orgs);
  }
  const pass = await leased(archiver, async (renew) => {
    const out = { entries: 0, files: 0, skipped: [] as string[] };
    for (const org of await archivedOrgs(deps.dir)) {
      const state = await stream.state(org);
      for (const file of await dayFilesOf(deps.dir, org, dayOfMs(cutoff))) {
        await renew();
        const r = await rewriteDayFile(file, change, { dryRun: false, noted: notedFile(state, org, file) });
        if (r.skipped) out.skipped.push(`${file}: ${r.skipped}`);
        else if (r.changed > 0) {
          out.entries += r.changed;
          out.files++;
        }
      }
    }
    return out;
  });
  if (!pass || !archivedFirst.ran) {
    // Another process kept the lease: this directory's turn is given back for the next interval.
    await deps.redis.del(turnKey);
    await logPass(deps, { entries: 0, files: 0, skipped: [], leftInRedis: 0, bodies }, removal, cutoff);
    return { kind: 'locked', bodies };
  }
  const left = await leftInRedis(deps, cutoff, removal);
  await logPass(deps, { ...pass, leftInRedis: left, bodies }, removal, cutoff);
  return { kind: 'done', ...pass, leftInRedis: left, bodies };
}

async function logPass(
  deps: PersonalRetentionDeps,
  r: { entries: number; files: number; skipped: string[]; leftInRedis: number; bodies: number },
  removal: Removal,
  cutoff: number,
): Promise<void> {
  if (r.skipped.length > 0 || r.leftInRedis > 0)
    deps.logger?.warn(
      { skipped: r.skipped, leftInRedis: r.leftInRedis },
      'personal-data retention: some entries past the retention were not reached this pass (tried again next pass)',
    );
  if (r.entries === 0 && r.bodies === 0) return;
  deps.logger?.info(
    { entries: r.entries, files: r.files, bodies: r.bodies },
    `personal-data retention: ${removal.why}`,
  );
  await appendChange(deps.redis, deps.keys, {
    who: workActor(),
    action: 'audit.retention',
    org: null,
    tokenId: null,
    details: {
      removed: ['email', 'name'],
      why: removal.why,
      before: new Date(cutoff).toISOString(),
      entries: r.entries,
      files: r.files,
      // Kept bodies deleted whole (unreadable answers over 8 KiB beside the spool).
      bodies: r.bodies,
    },
  });
}
