// Helpers every command uses: errors said for a person with their exit codes, abortable long commands.
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

/** Exit codes, documented in the README and docs/errors.md: each error code's is in the catalogue. */
export { EXIT };

/**
 * The secrets of the environment, read directly (not through the config, which may be what failed):
 * an error message can quote the service, and the service may echo what it was sent.
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

/**
 * Prints an error for a person and returns the exit status its code has in the catalogue: one sentence for
 * every catalogued error, a stack only for an error the catalogue does not know.
 */
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
  // Redis refusing the write (out of memory, a read-only replica...) is a state of Redis, said as such
  // (a MULTI refused as a whole, EXECABORT, is judged by its commands' errors), not a stack trace.
  const refusal = isWriteRefusal(err);
  if (refusal) {
    write(
      `learner-transfer: ${writeMessage(refusal.cause, null, DEFAULT_HIGH_WATER)}; nothing was changed\n`,
    );
    return ERRORS.LT_REDIS_WRITE_REFUSED.exit;
  }
  // A rule the check at start does not cover (or one revoked since): the same sentence, not a stack.
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

/** The Redis user, read directly from the environment (as the secrets are: the config may be what failed). */
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
 * The id of a run to read (report, audit, retry): one that fits the rule, or the stored id of a run from
 * an earlier release (which took any text). Checked against Redis, so after the context is made and
 * before anything is read; a usage error (exit 2) otherwise.
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
 * Runs a command body that walks for a long time (crawl, reconcile): a shutdown (SIGINT/SIGTERM) aborts its signal,
 * an interrupted run prints `interrupted` and exits 130, and the context is closed either way.
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
 * Each row needs an organization: from the file's org column, or --org. Without either every row would
 * be rejected for the same reason, so it is said once, as the usage error it is (exit 2), before
 * anything is written.
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

/**
 * The first ten rejected rows on stderr, `file:line: reason`, as they are found; then `more` once
 * (where the rest are).
 */
export function rejectPrinter(cli: Cli, csv: string, more: string): (line: number, reason: string) => void {
  let shown = 0;
  return (line, reason) => {
    if (shown++ < 10) cli.warn(forTerminal(`${csv}:${line}: ${reason}`, { singleLine: true }));
    else if (shown === 11) cli.warn(more);
  };
}
