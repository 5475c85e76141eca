// Every Redis key the tool writes, under one prefix; an organization's keys share a {hash tag}
// (decision 7, decision 11).

const ORG_KEY_RE = /^[A-Za-z0-9_-]{1,64}$/;

export function isValidOrgKey(org: string): boolean {
  return ORG_KEY_RE.test(org);
}

export interface Keys {
  prefix: string;
  /** BullMQ queue name for an organization; BullMQ builds `${prefix}:${name}:…` keys from it. */
  queueName(org: string): string;
  /** Limiter: sliding-window log of one token (sorted set: permit id -> stamped time). */
  tokenLog(org: string, tokenId: string): string;
  /** Limiter: permits of a token in flight (sorted set: permit id -> deadline). */
  tokenInflight(org: string, tokenId: string): string;
  /** Limiter: a 429 / 401 block on one token (string with a PX expiry, or no expiry for 401). */
  tokenBlock(org: string, tokenId: string): string;
  orgLog(org: string): string;
  orgInflight(org: string): string;
  orgBlock(org: string): string;
  /** Limiter: permits the service answered 429 in a scope, kept one window by learn.lua. */
  tokenRefused(org: string, tokenId: string): string;
  orgRefused(org: string): string;
  /** Hash token id -> the org key it was first used with (ids only): one token, one window. */
  tokenOrgs(): string;
  /** The key of the write probe (a string with a 60 s expiry): whether Redis takes writes. */
  writeProbe(): string;
  /** SCAN pattern of every organization's outcome hash. */
  outcomesPattern(): string;
  /** A key BullMQ keeps for a queue (suffix 'wait', 'meta', ...). */
  queueKey(queueName: string, suffix: string): string;
  /** Limiter: pub/sub channel announcing budget returned early (release, unblock). */
  limiterEvents(org: string): string;
  /** Limiter: the organization's live policy (hash; fields: limiter/kinds.ts, limiter/policy.ts). */
  policy(org: string): string;
  /** Limiter: pacing buckets (hash `org`, `tok:<id>` -> tat, Redis ms). */
  pace(org: string): string;
  /** The error budget (hash `org`, `tok:<id>` -> last outcomes; judge-outcome.lua). */
  breaker(org: string): string;
  /** Outcome store: hash learnerId -> compact outcome record. */
  outcomes(org: string): string;
  /** Outcome store: learner ids with one outcome code, scored by time. */
  outcomeIndex(org: string, code: string): string;
  /** Outcome store: prefix of the per-bucket indexes (same slot as `outcomes`). */
  outcomeIndexPrefix(org: string): string;
  /** Learners of an organization per bucket, over all runs (hash bucket -> count). */
  orgCounts(org: string): string;
  /** Per-run bucket counters of one organization (hash bucket -> count, plus `total`). */
  runCounters(org: string, runId: string): string;
  /** Failed learners of one run in one organization (sorted set learnerId -> time). */
  runFailures(org: string, runId: string): string;
  /**
   * Canary runs awaiting approval in one organization (hash run id -> canary size).
   */
  canaryRuns(org: string): string;
  /** Audit stream of successful transfers' full results. */
  audit(org: string): string;
  /** Run metadata and counters (not per organization: a run may span several). */
  run(runId: string): string;
  runs(): string;
  /** Crawl cursor, schedules and other small state. */
  crawlCursor(org: string, crawlId: string): string;
  /** Crawl: set of learner ids a crawl has selected (exact dedupe across a kill and resume). */
  crawlSelected(org: string, crawlId: string): string;
  /** Numeric organization id per org key (hash), from --target-org-id / --org-id. */
  orgIds(): string;
  /** BullMQ queue of control jobs (scheduled reconciles), served by every `work` process. */
  controlQueueName(): string;
  /** The control queue's name before cluster support: upgraded at start. */
  legacyControlQueueName(): string;
  /** Dashboard: outcomes of one hour (hash code -> count), kept two days. */
  hourly(org: string, hourIndex: number): string;
  /** Per-learner lease (hash learnerId -> "holder deadline contestedAt"; decision 8). */
  lease(org: string): string;
  /** Audit dedupe (hash transfer or spool id -> stream id): a replayed response writes once. */
  auditIds(org: string): string;
  /** BullMQ's lock of a transfer job, checked before a call is sent. */
  jobLock(org: string, jobId: string): string;
  /** Claims across organizations (hash learnerId -> org key), in a slot of its own (decision 8). */
  claims(): string;
  /** Version of the state layout this prefix holds (app/state-upgrade.ts). */
  stateVersion(): string;
  /** Stream of changes made through the live controls (limiter/control-log.ts); never trimmed. */
  changes(): string;
  /** Lanes with work, scored by when each needs a worker (sorted set; worker/lanes.ts). */
  lanesDue(): string;
  /** Pub/sub channel: a lane was marked due (a nudge; the sorted set is the truth). */
  lanesChannel(): string;
  /** Audit archive state (hash: `last` archived id; `file`, `size` during a write). */
  auditArchive(org: string): string;
  /** Organizations with audit entries not yet archived (set of org keys). */
  auditUnarchived(): string;
  /** The audit archiver's lease (string: holder, with a PX expiry): one exporter at a time. */
  auditArchiveLock(): string;
  /** Runs compacted after RUN_RETENTION (hash run id -> JSON summary). */
  runsCompacted(): string;
  /** Runs by their newest retry (sorted set run id -> time), so a retried run lists near the top. */
  runsActive(): string;
  /** The fleet's run-retention turn (a string with an expiry): one process compacts per interval. */
  runRetentionLock(): string;
  /** The personal-data retention's turn of one archive directory, with an expiry. */
  auditRetentionTurn(disk: string): string;
  /**
   * Notifications (ops/notify/notifier.ts): an event's claim (SET NX, once per fleet), the
   * fleet check's turn, and the stuck organizations (hash org -> "sinceMs scope said").
   */
  notified(eventId: string): string;
  notifyTurn(): string;
  notifyStuck(): string;
}

export function createKeys(prefix: string): Keys {
  const o = (org: string) => `${prefix}:{${org}}`;
  return {
    prefix,
    queueName: (org) => `transfers-{${org}}`,
    tokenLog: (org, t) => `${o(org)}:lim:tok:${t}:log`,
    tokenInflight: (org, t) => `${o(org)}:lim:tok:${t}:inflight`,
    tokenBlock: (org, t) => `${o(org)}:lim:tok:${t}:block`,
    orgLog: (org) => `${o(org)}:lim:org:log`,
    orgInflight: (org) => `${o(org)}:lim:org:inflight`,
    orgBlock: (org) => `${o(org)}:lim:org:block`,
    pace: (org) => `${o(org)}:lim:pace`,
    tokenRefused: (org, t) => `${o(org)}:lim:tok:${t}:refused`,
    orgRefused: (org) => `${o(org)}:lim:org:refused`,
    tokenOrgs: () => `${prefix}:token-orgs`,
    writeProbe: () => `${prefix}:redis-write-probe`,
    outcomesPattern: () => `${prefix}:{*}:out`,
    queueKey: (queueName, suffix) => `${prefix}:${queueName}:${suffix}`,
    limiterEvents: (org) => `${o(org)}:lim:events`,
    policy: (org) => `${o(org)}:policy`,
    breaker: (org) => `${o(org)}:breaker`,
    outcomes: (org) => `${o(org)}:out`,
    outcomeIndex: (org, code) => `${o(org)}:out:idx:${code}`,
    outcomeIndexPrefix: (org) => `${o(org)}:out:idx:`,
    orgCounts: (org) => `${o(org)}:counts`,
    runCounters: (org, runId) => `${o(org)}:run:${runId}`,
    runFailures: (org, runId) => `${o(org)}:run:${runId}:fail`,
    canaryRuns: (org) => `${o(org)}:canary`,
    audit: (org) => `${o(org)}:audit`,
    run: (runId) => `${prefix}:run:${runId}`,
    runs: () => `${prefix}:runs`,
    crawlCursor: (org, crawlId) => `${o(org)}:crawl:${crawlId}`,
    crawlSelected: (org, crawlId) => `${o(org)}:crawl:${crawlId}:selected`,
    orgIds: () => `${prefix}:org-ids`,
    controlQueueName: () => '{control}',
    legacyControlQueueName: () => 'control',
    hourly: (org, hour) => `${o(org)}:hourly:${hour}`,
    lease: (org) => `${o(org)}:lease`,
    auditIds: (org) => `${o(org)}:audit:ids`,
    jobLock: (org, jobId) => `${prefix}:transfers-{${org}}:${jobId}:lock`,
    claims: () => `${prefix}:{claims}`,
    stateVersion: () => `${prefix}:state-version`,
    changes: () => `${prefix}:changes`,
    lanesDue: () => `${prefix}:{lanes}:due`,
    lanesChannel: () => `${prefix}:lanes`,
    auditArchive: (org) => `${o(org)}:audit:archive`,
    auditUnarchived: () => `${prefix}:audit:unarchived`,
    auditArchiveLock: () => `${prefix}:audit:archive-lock`,
    runsCompacted: () => `${prefix}:runs:compacted`,
    runsActive: () => `${prefix}:runs:active`,
    runRetentionLock: () => `${prefix}:run-retention:lock`,
    auditRetentionTurn: (disk) => `${prefix}:audit-retention:${disk}`,
    notified: (eventId) => `${prefix}:{notify}:sent:${eventId}`,
    notifyTurn: () => `${prefix}:{notify}:turn`,
    // The key keeps its first name: a fleet mid-migration reads what the previous release wrote.
    notifyStuck: () => `${prefix}:{notify}:held`,
  };
}
