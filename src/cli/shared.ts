// Helpers every command uses: errors worded for a person, exit codes, abortable long commands.
import { proxySecrets } from '../core/egress.ts';
import { ERRORS, EXIT, LearnerTransferError } from '../core/errors.ts';
import { isReadableRunId, READABLE_RUN_ID_EXPECTED } from '../core/ids.ts';
import { scrubSecrets } from '../core/log.ts';
import { forTerminal } from '../core/terminal-safe.ts';
import { permissionDenial, permissionSentence } from '../redis/permission-denial.ts';
import { isWriteRefusal } from '../redis/refusals.ts';
import { DEFAULT_HIGH_WATER, writeMessage } from '../redis/writes.ts';
import type { Cli, Env } from './io.ts';
import { hasOrgColumn } from '../queue/sources/csv.ts';

/** Exit codes (README, docs/errors.md); each error code's is in the catalogue. */
export { EXIT };

/**
 * The environment's secrets, read directly (the config may be what failed): an error can quote
 * the service, which may echo what it was sent.
 */
function environmentSecrets(env: Env): string[] {
  const tokens = (env.LEARNER_API_TOKENS ?? '')
    .split(',')
    .map((pair) => pair.slice(pair.indexOf(':') + 1).trim())
    .filter((t) => t.length >= 4);
  const others = [
    env.DASHBOARD_TOKEN,
    env.DASHBOARD_READ_TOKEN,
    env.REDIS_PASSWORD,
    env.REDIS_SENTINEL_PASSWORD,
    ...urlPasswords(env.REDIS_URL),
    // An error may quote the proxy URL (undici's own messages can): its password too.
    ...proxySecrets(env),
  ]
    .map((v) => v?.trim())
    .filter((v): v is string => v !== undefined && v.length >= 4);
  return [...tokens, ...others];
}

/** The password of a Redis URL, as written and decoded (an error may quote either). */
function urlPasswords(url: string | undefined): string[] {
  if (!url) return [];
  try {
    const password = new URL(url).password;
    return password ? [password, decodeURIComponent(password)] : [];
  } catch {
    return [];
  }
}

/** Prints an error for a person, returns its exit status; a stack only if uncatalogued. */
export function reportCliError(
  err: unknown,
  out: (text: string) => void = (text) => process.stderr.write(text),
  env: Env = process.env,
): number {
  // An error can quote the service: no token, and nothing a terminal would run.
  const write = (text: string) => out(forTerminal(scrubSecrets(text, environmentSecrets(env))));
  if (err instanceof LearnerTransferError) {
    const info = ERRORS[err.code];
    write(`learner-transfer: ${info.kind === 'internal' ? 'internal error: ' : ''}${err.message}\n`);
    return info.exit;
  }
  // Redis refusing a write (OOM, read-only replica; EXECABORT by its commands' errors) is a state
  // of Redis, said as such, not a stack trace.
  const refusal = isWriteRefusal(err);
  if (refusal) {
    write(
      `learner-transfer: ${writeMessage(refusal.cause, null, DEFAULT_HIGH_WATER)}; nothing was changed\n`,
    );
    return ERRORS.LT_REDIS_WRITE_REFUSED.exit;
  }
  // An ACL rule the start check missed (or revoked since): the same sentence, not a stack.
  const denial = permissionDenial(err);
  if (denial) {
    write(
      `learner-transfer: ${permissionSentence(environmentRedisUser(env), [denial], environmentPrefix(env))}\n`,
    );
    return ERRORS.LT_REDIS_PERMISSION.exit;
  }
  write(`learner-transfer: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
  return ERRORS.LT_INTERNAL.exit;
}

/** The Redis user, read directly from the environment, as the secrets are. */
function environmentRedisUser(env: Env): string {
  let fromUrl = '';
  if (!env.REDIS_CLUSTER_NODES && !env.REDIS_SENTINELS) {
    try {
      fromUrl = decodeURIComponent(new URL(env.REDIS_URL ?? '').username);
    } catch {
      // no URL, or not one: the other sources
    }
  }
  return fromUrl || env.REDIS_USERNAME?.trim() || 'default';
}

function environmentPrefix(env: Env): string {
  return env.QUEUE_PREFIX?.trim() || 'ltx';
}

/**
 * The id of a run to read: one that fits the rule, or a stored id from an earlier release (which
 * took any text), checked against Redis before anything is read; else a usage error (exit 2).
 */
export async function requireReadableRunId(
  runs: { exists(id: string): Promise<boolean> },
  flag: string,
  value: string | undefined,
): Promise<void> {
  if (value === undefined || (await isReadableRunId(value, (id) => runs.exists(id)))) return;
  throw new LearnerTransferError('LT_USAGE', `${flag} expects ${READABLE_RUN_ID_EXPECTED}, got '${value}'`);
}

/**
 * Runs a long command body (crawl, reconcile): SIGINT/SIGTERM aborts its signal, an interrupted
 * run exits 130, and the context is closed either way.
 */
export async function runAbortable(
  cli: Cli,
  ctx: { close(): Promise<void> },
  interrupted: string,
  body: (signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const abort = new AbortController();
  const off = cli.onShutdown(() => abort.abort(), 10_000);
  try {
    await body(abort.signal);
  } catch (err) {
    if (!abort.signal.aborted) throw err;
    cli.warn(interrupted);
    cli.exitCode = EXIT.interrupted;
  } finally {
    off();
    await ctx.close();
  }
}

/**
 * Each row needs an organization (the org column or --org); without either, one usage error
 * (exit 2) before anything is written, not a rejection per row.
 */
export async function requireOrgSource(
  csv: string,
  org: string | undefined,
  orgs: readonly string[],
): Promise<void> {
  if (org !== undefined || (await hasOrgColumn(csv))) return;
  throw new LearnerTransferError(
    'LT_USAGE',
    `--org is required: ${forTerminal(csv, { singleLine: true })} has no org column, so its rows name no ` +
      `organization (give --org KEY, one of: ${orgs.join(', ') || 'none'}; or add an org column)`,
  );
}

/** The first ten rejected rows on stderr, `file:line: reason`; then `more` once. */
export function rejectPrinter(cli: Cli, csv: string, more: string): (line: number, reason: string) => void {
  let shown = 0;
  return (line, reason) => {
    if (shown++ < 10) cli.warn(forTerminal(`${csv}:${line}: ${reason}`, { singleLine: true }));
    else if (shown === 11) cli.warn(more);
  };
}
