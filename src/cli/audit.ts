import { existsSync } from 'node:fs';
import { Command, InvalidArgumentError, Option } from 'commander';
import { requireOrg } from '../app/context.ts';
import { LearnerTransferError } from '../core/errors.ts';
import { exportAndTrim, exportAudit } from '../ops/audit-export.ts';
import { AuditStream } from '../outcomes/audit-stream.ts';
import { requireReadableRunId } from './shared.ts';
import type { Cli } from './io.ts';
import { learnerIdOption } from './parsers.ts';

interface AuditFlags {
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

const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;
const TIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * A UTC day (2026-11-26) or an ISO time with its zone (2026-11-26T08:00:00Z). A day given to --until
 * means its whole day: --since 2026-11-01 --until 2026-11-30 is November.
 */
export function dateOption(flag: string, endOfDay: boolean) {
  return (value: string): number => {
    const v = value.trim();
    const ms = DAY_RE.test(v) ? Date.parse(`${v}T00:00:00Z`) : TIME_RE.test(v) ? Date.parse(v) : NaN;
    if (!Number.isFinite(ms)) {
      throw new InvalidArgumentError(
        `${flag} expects a UTC day like 2026-11-26 or a time with its zone like 2026-11-26T08:00:00Z, got '${value}'`,
      );
    }
    return DAY_RE.test(v) && endOfDay ? ms + 86_400_000 - 1 : ms;
  };
}

/** --trim takes every entry of the organizations: a filter would trim entries the file does not hold. */
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

/** A redacted file is no copy to trim against: the way back needs the addresses the trim would take. */
function checkRedact(opts: AuditFlags): void {
  if (!opts.redact || !opts.trim) return;
  throw new LearnerTransferError(
    'LT_USAGE',
    '--redact cannot go with --trim: the trim would leave no copy of the e-mail addresses and names ' +
      '(export with --trim first, then a redacted copy with --redact)',
  );
}

/** An archive named on the command line must be there: a mistyped path would answer "no entries". */
function checkArchive(dir: string | undefined): void {
  if (dir === undefined || existsSync(dir)) return;
  throw new LearnerTransferError(
    'LT_USAGE',
    `--archive ${dir}: no such directory (the audit archive to read)`,
  );
}

export function register(program: Command, cli: Cli): void {
  program
    .command('audit')
    .description(
      'Export the audit record of every transfer (groups removed and added, authorizations revoked) as NDJSON, ' +
        'from the archive files then the stream',
    )
    .option('--org <key...>', 'only these organizations')
    .option('--run <id>', 'only transfers of this run')
    .addOption(new Option('--learner <id>', 'only this learner').argParser(learnerIdOption('--learner')))
    .addOption(
      new Option('--since <date>', 'only entries written from this UTC day or time on').argParser(
        dateOption('--since', false),
      ),
    )
    .addOption(
      new Option('--until <date>', 'only entries written up to this UTC day (included) or time').argParser(
        dateOption('--until', true),
      ),
    )
    .option('--archive <dir>', 'the audit archive to read too (default AUDIT_ARCHIVE_DIR)')
    .option('--out <file>', 'write here instead of stdout')
    .option(
      '--redact',
      'write without the e-mail addresses and names of the revoked authorizations (docs/exports.md)',
    )
    .option(
      '--trim',
      'once FILE is on disk and read back, trim the exported entries from Redis (needs --out)',
    )
    .action(async (opts: AuditFlags) => {
      checkTrim(opts);
      checkRedact(opts);
      checkArchive(opts.archive);
      const config = cli.config();
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
    });
}
