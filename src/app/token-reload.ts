// `work` follows LEARNER_API_TOKENS_FILE without a restart (on SIGHUP and every
// TOKENS_RELOAD_INTERVAL): new tokens are bound first, as at start; a bad file changes nothing;
// each change goes to the change log (docs/configuration.md, "Tokens in a file").
import type { Keys } from '../core/keys.ts';
import type { Logger } from '../core/log.ts';
import type { TokenBook, TokenChange } from '../core/token-book.ts';
import { parseTokenFile, readTokenText, tokenFileModeWarning, TOKENS_FILE_VAR } from '../core/token-file.ts';
import type { TokenRef } from '../core/token-ref.ts';
import { appendChange, workActor } from '../limiter/control-log.ts';
import { bindEach, conflictSentence, type BindConflict } from '../limiter/token-orgs.ts';
import type { RedisClient } from '../redis/client.ts';

export type ReloadTrigger = 'SIGHUP' | 'interval';

export type ReloadResult =
  /** Nothing new: the same text as the last read, or the same tokens as those applied. */
  | { status: 'unchanged' }
  | { status: 'changed'; change: TokenChange; refused: BindConflict[] }
  /** The file's tokens are those in force, less the refused ones. */
  | { status: 'refused'; refused: BindConflict[] }
  | { status: 'failed'; problems: string[] };

export interface TokenReloadDeps {
  tokens: TokenBook;
  redis: RedisClient;
  keys: Keys;
  logger: Logger;
}

export interface TokenReloadOptions {
  path: string;
  /** TOKENS_RELOAD_INTERVAL; 0 reads the file only on SIGHUP. */
  intervalMs: number;
}

/** One signature per set of tokens, whatever their order or comments. */
const signature = (tokens: readonly TokenRef[]) =>
  tokens
    .map((t) => `${t.org}\u0000${t.id}`)
    .sort()
    .join('\n');

export class TokenReloader {
  readonly #deps: TokenReloadDeps;
  readonly #options: TokenReloadOptions;
  /**
   * The file's tokens at the last reload that got through: the same again does nothing (and
   * logs nothing).
   */
  #applied: string;
  /**
   * The text last read to an end: an interval that reads the same text stops there (parsing
   * 20,000 tokens costs 130 ms).
   */
  #lastText: string | undefined;
  /** The last error logged: the same error is not logged again at each interval. */
  #lastProblem: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #chain: Promise<unknown> = Promise.resolve();
  #stopped = false;

  constructor(deps: TokenReloadDeps, options: TokenReloadOptions) {
    this.#deps = deps;
    this.#options = options;
    this.#applied = signature(deps.tokens.all());
  }

  /** Warns once of a file others may read, and starts the interval (when there is one). */
  start(): void {
    const warning = tokenFileModeWarning(this.#options.path);
    if (warning) this.#deps.logger.warn({ file: this.#options.path }, warning);
    if (this.#options.intervalMs > 0) {
      this.#timer = setInterval(() => {
        this.reload('interval').catch((err: unknown) =>
          this.#deps.logger.error(
            { err: (err as Error)?.message ?? String(err) },
            'token file reload failed',
          ),
        );
      }, this.#options.intervalMs);
      // The workers keep the process alive; this timer alone must not.
      this.#timer.unref();
    }
  }

  /** Reads the file again and applies it; reloads run one after the other, never two at once. */
  reload(trigger: ReloadTrigger): Promise<ReloadResult> {
    const next = this.#chain.then(() =>
      this.#stopped ? ({ status: 'unchanged' } as const) : this.#reloadOnce(trigger),
    );
    this.#chain = next.catch(() => undefined);
    return next;
  }

  /** Stops the interval and waits for a reload under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    await this.#chain;
  }

  async #reloadOnce(trigger: ReloadTrigger): Promise<ReloadResult> {
    const { tokens, logger } = this.#deps;
    const path = this.#options.path;
    const text = readTokenText(path);
    if (!text.ok) return this.#failed(trigger, text.problems);
    // A signal always applies the file: after `tokens rebind`, a refused token is checked again.
    if (trigger === 'interval' && text.text === this.#lastText) return { status: 'unchanged' };
    const read = parseTokenFile(text.text, path);
    const problems = !read.ok
      ? read.problems
      : read.tokens.length === 0
        ? [
            `${TOKENS_FILE_VAR} ${path}: no ORG:TOKEN line (an empty file is taken for a mistake, not applied)`,
          ]
        : [];
    if (!read.ok || problems.length > 0) {
      this.#lastText = text.text;
      return this.#failed(trigger, problems);
    }
    const wanted = read.tokens;
    const sig = signature(wanted);
    if (trigger === 'interval' && sig === this.#applied) {
      this.#lastText = text.text;
      return { status: 'unchanged' };
    }

    const inForce = new Set(tokens.all().map((t) => `${t.org}\u0000${t.id}`));
    const fresh = wanted.filter((t) => !inForce.has(`${t.org}\u0000${t.id}`));
    let refused: BindConflict[];
    try {
      // Bound before use, as at start: a token of another organization would spend its hour
      // twice.
      refused = await bindEach(this.#deps.redis, this.#deps.keys.prefix, fresh, {
        logger,
        source: TOKENS_FILE_VAR,
      });
    } catch (err) {
      return this.#failed(trigger, [
        `${TOKENS_FILE_VAR} ${path}: could not check the new tokens' organizations in Redis (${(err as Error).message})`,
      ]);
    }
    this.#lastProblem = undefined;
    this.#applied = sig;
    this.#lastText = text.text;
    for (const c of refused) {
      logger.error(
        { file: path, tokenId: c.token.id, org: c.token.org, boundTo: c.boundTo, code: 'LT_TOKEN_BOUND' },
        `${conflictSentence(c, `${TOKENS_FILE_VAR} ${path}`)}: token refused, not used (one token, one ` +
          `organization). Fix the file, or run 'learner-transfer tokens rebind --token ${c.token.id} --org ` +
          `${c.token.org}' and send SIGHUP`,
      );
    }
    const out = new Set(refused.map((c) => `${c.token.org}\u0000${c.token.id}`));
    const change = tokens.replace(wanted.filter((t) => !out.has(`${t.org}\u0000${t.id}`)));
    if (change.added.length === 0 && change.removed.length === 0) {
      return refused.length > 0 ? { status: 'refused', refused } : { status: 'unchanged' };
    }
    await this.#record(trigger, change, refused);
    return { status: 'changed', change, refused };
  }

  #failed(trigger: ReloadTrigger, problems: string[]): ReloadResult {
    const text = problems.join('; ');
    if (trigger === 'SIGHUP' || text !== this.#lastProblem) {
      this.#deps.logger.error(
        { file: this.#options.path, trigger, problems },
        `token file not reloaded, the ${this.#deps.tokens.all().length} tokens in force are kept: ${text}`,
      );
    }
    this.#lastProblem = text;
    return { status: 'failed', problems };
  }

  /** The change in the log line and the change log: organizations and token ids only. */
  async #record(trigger: ReloadTrigger, change: TokenChange, refused: BindConflict[]): Promise<void> {
    const { logger, redis, keys } = this.#deps;
    const ids = (list: readonly TokenRef[], org?: string) =>
      list.filter((t) => org === undefined || t.org === org).map((t) => t.id);
    logger.info(
      {
        file: this.#options.path,
        trigger,
        added: change.added.map((t) => ({ org: t.org, tokenId: t.id })),
        removed: change.removed.map((t) => ({ org: t.org, tokenId: t.id })),
        orgsAdded: change.orgsAdded,
        orgsRemoved: change.orgsRemoved,
      },
      `tokens reloaded from ${this.#options.path}: ${change.added.length} added, ${change.removed.length} removed`,
    );
    const who = workActor();
    // One entry per organization, so an organization's change log shows its own tokens.
    const writes = change.orgsChanged.map((org) =>
      appendChange(redis, keys, {
        who,
        action: 'tokens.reload',
        org,
        tokenId: null,
        details: {
          file: this.#options.path,
          trigger,
          added: ids(change.added, org),
          removed: ids(change.removed, org),
          ...(refused.some((c) => c.token.org === org)
            ? {
                refused: refused
                  .filter((c) => c.token.org === org)
                  .map((c) => ({ tokenId: c.token.id, boundTo: c.boundTo })),
              }
            : {}),
        },
      }),
    );
    const failed = (await Promise.allSettled(writes)).filter((r) => r.status === 'rejected');
    if (failed.length > 0) {
      logger.warn(
        { err: String((failed[0] as PromiseRejectedResult).reason) },
        `the token change is in force, but ${failed.length} of its change-log entries could not be written`,
      );
    }
  }
}
