import { existsSync } from 'node:fs';
import { requireOrg } from '../app/context.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { exportAndTrim, exportAudit } from '../ops/audit/export.ts';
import { forgetPerson, type FieldsEraser, type ForgetReport } from '../ops/audit/forget.ts';
import type { Person } from '../ops/audit/redact.ts';
import { forgetInSpool } from '../worker/spool-forget.ts';
import { cliActor } from '../limiter/control-log.ts';
import { AuditStream } from '../outcomes/audit-stream.ts';
import { requireReadableRunId } from './shared.ts';
import type { Cli } from './io.ts';

export interface AuditFlags {
  org?: string[];
  run?: string;
  learner?: number;
  out?: string;
  trim?: boolean;
  since?: number;
  until?: number;
  archive?: string;
  redact?: boolean;
}

/** --trim takes every entry of the organizations: a filter would trim entries the file lacks. */
function checkTrim(opts: AuditFlags): void {
  if (!opts.trim) return;
  if (!opts.out) {
    throw new LearnerTransferError(
      'LT_USAGE',
      '--trim needs --out FILE: the stream is trimmed only once FILE holds it',
    );
  }
  const filters = (['run', 'learner', 'since', 'until'] as const).filter((f) => opts[f] !== undefined);
  if (filters.length > 0) {
    throw new LearnerTransferError(
      'LT_USAGE',
      `--trim cannot take ${filters.map((f) => `--${f}`).join(', ')}: the trim would remove entries the file ` +
        'does not hold (export everything of the organizations with --trim, and filter the file instead)',
    );
  }
}

/** A redacted file is no copy to trim against: the way back needs the addresses trimmed. */
function checkRedact(opts: AuditFlags): void {
  if (!opts.redact || !opts.trim) return;
  throw new LearnerTransferError(
    'LT_USAGE',
    '--redact cannot go with --trim: the trim would leave no copy of the e-mail addresses and names ' +
      '(export with --trim first, then a redacted copy with --redact)',
  );
}

/** An archive named on the command line must exist: a mistyped path would answer "no entries". */
function checkArchive(dir: string | undefined): void {
  if (dir === undefined || existsSync(dir)) return;
  throw new LearnerTransferError(
    'LT_USAGE',
    `--archive ${dir}: no such directory (the audit archive to read)`,
  );
}

/** What `audit forget` says: how many entries in how many places (never the address). */
export function forgetSummary(r: ForgetReport): string[] {
  const verb = r.dryRun ? 'would change' : 'changed';
  const total = r.archive.entries + r.spool.entries + r.bodies.files + (r.dryRun ? r.redis.entries : 0);
  const places = [
    r.dryRun ? `${r.redis.entries} in Redis (archived first, then rewritten in the archive)` : '',
    `${r.archive.entries} in ${r.archive.files} archive file${r.archive.files === 1 ? '' : 's'}`,
    `${r.spool.entries} in ${r.spool.files} spool file${r.spool.files === 1 ? '' : 's'}`,
    `${r.bodies.files} kept bod${r.bodies.files === 1 ? 'y' : 'ies'} deleted`,
  ].filter(Boolean);
  const lines = [`audit forget: ${verb} ${total} entr${total === 1 ? 'y' : 'ies'}: ${places.join(', ')}`];
  for (const f of r.archive.skipped) lines.push(`  skipped ${f.file}: ${f.skipped ?? ''}; run forget again`);
  for (const f of r.spool.busy)
    lines.push(`  not touched ${f}: the spool of a running work process; run forget again once it stops`);
  for (const org of r.failedOrgs)
    lines.push(`  the stream of ${org} could not be archived: its entries stay in Redis`);
  if (!r.dryRun && r.redis.leftAfter > 0)
    lines.push(`  ${r.redis.leftAfter} entries written to Redis meanwhile name the person: run forget again`);
  return lines;
}

export async function auditCommand(cli: Cli, opts: AuditFlags): Promise<void> {
  checkTrim(opts);
  checkRedact(opts);
  checkArchive(opts.archive);
  const config = await cli.config();
  const orgs = opts.org ? opts.org.map((o) => requireOrg(config, o)) : [...config.orgs];
  const ctx = await cli.context(config);
  try {
    await requireReadableRunId(ctx.runs, '--run', opts.run);
    const src = {
      stream: new AuditStream(ctx.redis, ctx.keys),
      archiveDir: opts.archive ?? config.auditArchiveDir,
    };
    if (opts.trim && opts.out) {
      const r = await exportAndTrim(src, orgs, opts.out);
      cli.print(
        `${r.written} audit record${r.written === 1 ? '' : 's'} -> ${opts.out}; ${r.trimmed} trimmed from Redis`,
      );
      return;
    }
    const n = await exportAudit(
      src,
      { orgs, runId: opts.run, learnerId: opts.learner, sinceMs: opts.since, untilMs: opts.until },
      opts.out,
      cli.stdout,
      { redact: opts.redact },
    );
    if (opts.out) cli.print(`${n} audit record${n === 1 ? '' : 's'} -> ${opts.out}`);
  } finally {
    await ctx.close();
  }
}

export interface ForgetFlags {
  email?: string;
  userId?: number;
  archive?: string;
  dryRun?: boolean;
}

export async function forgetCommand(cli: Cli, opts: ForgetFlags): Promise<void> {
  if (opts.email === undefined && opts.userId === undefined)
    throw new LearnerTransferError('LT_USAGE', 'audit forget needs --email ADDRESS or --user-id N');
  checkArchive(opts.archive);
  const config = await cli.config();
  const ctx = await cli.context(config);
  try {
    const deps = {
      redis: ctx.redis,
      keys: ctx.keys,
      archiveDir: opts.archive ?? config.auditArchiveDir,
      spool: (erase: FieldsEraser, p: Person, dry: boolean) =>
        forgetInSpool(config.spoolDir, ctx.keys.prefix, erase, p, dry),
      orgs: [...config.orgs],
      logger: ctx.logger,
    };
    const person = { email: opts.email, userId: opts.userId };
    const r = await forgetPerson(deps, person, { dryRun: opts.dryRun === true, who: cliActor() });
    for (const line of forgetSummary(r)) cli.print(line);
  } finally {
    await ctx.close();
  }
}
