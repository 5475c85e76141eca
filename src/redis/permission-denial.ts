// What a Redis ACL refusal (NOPERM) means, in one sentence naming the missing rule and the
// command that grants it: at start (acl-check.ts), in the workers, and in the CLI.
import { LearnerTransferError } from '../core/errors.ts';
import type { RedisTarget } from '../core/redis-target.ts';

/** Where the least ACL the tool needs is written down. */
export const ACL_DOC = 'docs/redis-acl.md';

export type PermissionDenial =
  /** A command (a subcommand as `client|setname`), or undefined when Redis's words name none. */
  { kind: 'command'; command: string | undefined } | { kind: 'keys' } | { kind: 'channels' };

/**
 * Redis's words for an ACL refusal: NOPERM from commands, and a script's own wording (7.0 and
 * 7.2+).
 */
const REFUSAL = /\bNOPERM\b|The user executing the script can't|ACL failure in script/;

/**
 * The refusal `err` carries (a cluster's in `lastNodeError`, a MULTI's in `previousErrors`),
 * else undefined.
 */
export function permissionDenial(err: unknown): PermissionDenial | undefined {
  if (!err || typeof err !== 'object') return undefined;
  const e = err as { message?: unknown; lastNodeError?: unknown; previousErrors?: unknown; cause?: unknown };
  const message = typeof e.message === 'string' ? e.message : '';
  const at = message.search(REFUSAL);
  if (at >= 0) {
    const words = message.slice(at);
    const command = /'([^']+)' command/.exec(words)?.[1];
    if (command) return { kind: 'command', command: command.toLowerCase() };
    if (/\bchannels?\b/i.test(words)) return { kind: 'channels' };
    if (/\bkeys?\b/i.test(words)) return { kind: 'keys' };
    return { kind: 'command', command: undefined };
  }
  for (const inner of [
    e.lastNodeError,
    e.cause,
    ...(Array.isArray(e.previousErrors) ? (e.previousErrors as unknown[]) : []),
  ]) {
    const found = inner && inner !== err ? permissionDenial(inner) : undefined;
    if (found) return found;
  }
  return undefined;
}

/** The ACL user the tool logs in as: the URL's, else REDIS_USERNAME, else Redis's `default`. */
export function redisUser(target: RedisTarget): string {
  if (target.mode === 'standalone') {
    try {
      const fromUrl = decodeURIComponent(new URL(target.url).username);
      if (fromUrl) return fromUrl;
    } catch {
      // loadConfig checked that it parses
    }
  }
  return target.username || 'default';
}

function either(parts: string[]): string {
  return parts.length <= 1 ? (parts[0] ?? '') : `${parts.slice(0, -1).join(', ')} or ${parts.at(-1)}`;
}

/**
 * One sentence: what the user may not do, the ACL SETUSER rules that grant it, and the document
 * listing every rule. `node` names a cluster's refusing node.
 */
export function permissionSentence(
  user: string,
  denials: readonly PermissionDenial[],
  prefix: string,
  node?: string,
): string {
  const commands = [
    ...new Set(denials.flatMap((d) => (d.kind === 'command' && d.command ? [d.command] : []))),
  ];
  const unnamed = denials.some((d) => d.kind === 'command' && !d.command);
  const keys = denials.some((d) => d.kind === 'keys');
  const channels = denials.some((d) => d.kind === 'channels');
  const what: string[] = [];
  const rules: string[] = [];
  if (commands.length > 0) {
    what.push(`run ${commands.map((c) => `'${c}'`).join(', ')}`);
    rules.push(...commands.map((c) => `+${c}`));
  }
  if (unnamed) what.push('run a command it needs');
  if (keys) {
    what.push(`use the keys '${prefix}:*'`);
    rules.push(`~${prefix}:*`);
  }
  if (channels) {
    what.push(`publish to the channels '${prefix}:*'`);
    rules.push(`&${prefix}:*`);
  }
  const grant =
    rules.length > 0
      ? `grant ${rules.length > 1 ? 'them' : 'it'} with ACL SETUSER ${user} ${rules.join(' ')}; the tool needs the rules in ${ACL_DOC}`
      : `the tool needs the rules in ${ACL_DOC}`;
  return `Redis user '${user}' may not ${either(what)}${node ? ` on ${node}` : ''} (NOPERM): ${grant}`;
}

/** The error a command stops with (exit 7): the sentence, with Redis's refusal as its cause. */
export function permissionError(
  user: string,
  denials: readonly PermissionDenial[],
  prefix: string,
  options: { node?: string | undefined; cause?: unknown } = {},
): LearnerTransferError {
  return new LearnerTransferError(
    'LT_REDIS_PERMISSION',
    permissionSentence(user, denials, prefix, options.node),
    {
      cause: options.cause,
    },
  );
}
