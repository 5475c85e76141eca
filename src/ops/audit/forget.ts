// `audit forget`: erasure on request (docs/personal-data.md). The streams are archived first (a stream
// entry cannot be edited in place), then every day file, dead process's spool and kept body naming the
// person is rewritten or deleted; the change log never names them.
import { LearnerTransferError } from '../../core/errors.ts';
import type { Keys } from '../../core/keys.ts';
import type { Logger } from '../../core/log.ts';
import type { RedisClient } from '../../redis/client.ts';
import { appendChange } from '../../limiter/control-log.ts';
import { AuditStream } from '../../outcomes/audit-stream.ts';
import { AuditArchiver } from './archive.ts';
import { redactStoredFields, type Person, type Removal } from './redact.ts';
import {
  archivedOrgs,
  dayFilesOf,
  notedFile,
  rewriteDayFile,
  type EntryChange,
  type FileRewrite,
} from './rewrite.ts';

export interface ForgetDeps {
  redis: RedisClient;
  keys: Keys;
  /** AUDIT_ARCHIVE_DIR (required: the streams are archived, then rewritten there). */
  archiveDir: string | undefined;
  /**
   * The spool's side (worker/spool-forget.ts, a layer above this one): its files of processes that are
   * gone, and the kept bodies. None: not looked at.
   */
  spool?: ((erase: FieldsEraser, person: Person, dryRun: boolean) => Promise<SpoolForget>) | undefined;
  /** The organizations whose streams are archived first (the configured ones). */
  orgs: readonly string[];
  logger?: Logger | undefined;
}

export interface ForgetReport {
  dryRun: boolean;
  /** Entries in Redis that name the person: archived first (a dry run: would be); after: written since. */
  redis: { entries: number; leftAfter: number };
  archive: { entries: number; files: number; skipped: FileRewrite[] };
  spool: { entries: number; files: number; busy: string[] };
  bodies: { files: number };
  /** Organizations whose stream could not be archived (their entries stay in Redis). */
  failedOrgs: string[];
}

/** What the erasure makes of one entry's fields (undefined: nothing of the person in it). */
export type FieldsEraser = (
  fields: Record<string, string>,
) => { fields: Record<string, string>; changed: number } | undefined;

/** What the spool's side of an erasure changed (or would). */
export interface SpoolForget {
  spool: { entries: number; files: number; busy: string[] };
  bodies: { files: number };
}

const eraseFields =
  (person: Person, removal: Removal): FieldsEraser =>
  (fields) =>
    redactStoredFields(fields, { person, removal });

/** Stream entries that name the person, per organization (read only). */
async function countInRedis(deps: ForgetDeps, person: Person): Promise<number> {
  const stream = new AuditStream(deps.redis, deps.keys);
  const erase = eraseFields(person, { at: '', why: '' });
  let n = 0;
  for (const org of deps.orgs) {
    let after = '';
    for (;;) {
      const batch = await stream.read(org, after, '+', 1000);
      for (const e of batch) if (erase(e.fields)) n++;
      if (batch.length < 1000) break;
      after = (batch[batch.length - 1] as { id: string }).id;
    }
  }
  return n;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The archiver's pass over every configured organization, waiting a little for a lease another holds. */
async function archiveFirst(archiver: AuditArchiver, orgs: readonly string[]): Promise<string[]> {
  for (let i = 0; i < 20; i++) {
    const pass = await archiver.runOnce(orgs);
    if (pass.ran) return pass.failed;
    await sleep(500);
  }
  throw new LearnerTransferError(
    'LT_USAGE',
    'audit forget: the audit archiver of another process held its lease for 10 s; nothing was changed, try again',
  );
}

/** Every day file of the archive through the erasure, under the lease. */
async function rewriteArchive(
  deps: ForgetDeps & { archiveDir: string },
  archiver: AuditArchiver | undefined,
  change: EntryChange,
  dryRun: boolean,
): Promise<FileRewrite[]> {
  const stream = new AuditStream(deps.redis, deps.keys);
  const run = async (renew: () => Promise<void>) => {
    const out: FileRewrite[] = [];
    for (const org of await archivedOrgs(deps.archiveDir)) {
      const state = await stream.state(org);
      for (const file of await dayFilesOf(deps.archiveDir, org)) {
        await renew();
        const noted = notedFile(state, org, file);
        const r = await rewriteDayFile(file, change, { dryRun, noted });
        if (r.changed > 0 || r.skipped) out.push(r);
      }
    }
    return out;
  };
  if (!archiver) return run(async () => undefined);
  for (let i = 0; i < 20; i++) {
    const r = await archiver.withLease(run);
    if (r) return r;
    await sleep(500);
  }
  throw new LearnerTransferError(
    'LT_USAGE',
    'audit forget: the audit archiver of another process held its lease for 10 s; try again (the archive ' +
      'was not rewritten)',
  );
}

/** Checks the person and the archive, then erases (or, dry, counts) everywhere; logs it in `changes`. */
export async function forgetPerson(
  deps: ForgetDeps,
  person: Person,
  options: { dryRun: boolean; who: string; now?: number | undefined },
): Promise<ForgetReport> {
  if (!deps.archiveDir) {
    throw new LearnerTransferError(
      'LT_USAGE',
      'audit forget needs AUDIT_ARCHIVE_DIR (or --archive DIR): an entry of the Redis stream cannot be ' +
        'edited in place, so the streams are archived first and the person erased from the day files',
    );
  }
  const removal = { at: new Date(options.now ?? Date.now()).toISOString(), why: 'erasure request' };
  const erase = eraseFields(person, removal);
  const change: EntryChange = (e) => {
    const r = erase(e.fields);
    return r ? { ...e, fields: r.fields } : undefined;
  };
  const dir = { ...deps, archiveDir: deps.archiveDir };
  const inRedis = await countInRedis(deps, person);
  const archiver = options.dryRun
    ? undefined
    : new AuditArchiver(deps.redis, deps.keys, { dir: deps.archiveDir, logger: deps.logger });
  const failedOrgs = archiver ? await archiveFirst(archiver, deps.orgs) : [];
  const files = await rewriteArchive(dir, archiver, change, options.dryRun);
  const { spool, bodies } = deps.spool
    ? await deps.spool(erase, person, options.dryRun)
    : { spool: { entries: 0, files: 0, busy: [] }, bodies: { files: 0 } };
  const changed = files.filter((f) => !f.skipped);
  const report: ForgetReport = {
    dryRun: options.dryRun,
    redis: { entries: inRedis, leftAfter: options.dryRun ? inRedis : await countInRedis(deps, person) },
    archive: {
      entries: changed.reduce((a, f) => a + f.changed, 0),
      files: changed.length,
      skipped: files.filter((f) => f.skipped),
    },
    spool,
    bodies,
    failedOrgs,
  };
  if (!options.dryRun) await logForget(deps, report, person, options.who);
  return report;
}

async function logForget(deps: ForgetDeps, r: ForgetReport, person: Person, who: string): Promise<void> {
  await appendChange(deps.redis, deps.keys, {
    who,
    action: 'audit.forget',
    org: null,
    tokenId: null,
    details: {
      // Never the address or the id in clear: only which kind of key was given.
      person: person.email !== undefined ? 'an e-mail address' : 'a user id',
      archiveEntries: r.archive.entries,
      archiveFiles: r.archive.files,
      spoolEntries: r.spool.entries,
      bodies: r.bodies.files,
      skippedFiles: r.archive.skipped.length,
      leftInRedis: r.redis.leftAfter,
    },
  });
}
