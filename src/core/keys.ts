// Every Redis key the tool writes comes from here. Each organization's keys share one {hash tag}, so the
// multi-key limiter script and BullMQ's own scripts work on Redis Cluster.

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
  /**
   * Limiter: the permits the service answered 429 in a scope (learn.lua keeps them one window, so a later
   * count of what the service accepted leaves them out), beside the scope's log, in the same slot.
   */
  tokenRefused(org: string, tokenId: string): string;
  orgRefused(org: string): string;
  /**
   * The organization key each token id was first used with (hash token id -> org key; ids only, never a
   * token): one token, one hourly window, whatever key it is configured under.
   */
  tokenOrgs(): string;
  /** The key of the write probe (a string with a 60 s expiry): whether Redis takes writes. */
  writeProbe(): string;
  /** SCAN pattern of every organization's outcome hash (the upgrade of older state walks them). */
  outcomesPattern(): string;
  /** A key BullMQ keeps for a queue (`${prefix}:${queueName}:${suffix}`, e.g. 'wait', 'meta'). */
  queueKey(queueName: string, suffix: string): string;
  /** Limiter: pub/sub channel announcing budget returned early (release, unblock), for optional wake-ups. */
  limiterEvents(org: string): string;
  /**
   * Limiter: the organization's live policy (hash: each kind of limit's fields, as src/limiter/kinds.ts
   * lists them, and the pauses and seed of src/limiter/policy.ts). In the org's slot, so
   * acquire.lua reads it in the same atomic step as the budget.
   */
  policy(org: string): string;
  /**
   * Limiter: the pacing buckets of an organization and its tokens (hash: `org`, `tok:<id>` -> tat, Redis
   * ms; acquire.lua "Pacing"). Expires when every bucket is full again.
   */
  pace(org: string): string;
  /**
   * The error budget of an organization (limiter/judge-outcome.lua; hash: `org` and `tok:<id>` -> the
   * sample of its last final outcomes, newest first; `answers`, `storm`, `probe`: the 5xx storm and its
   * one probe). In the org's slot, so the script writes the pause in the same step. Written on the outcome
   * path only, never polled.
   */
  breaker(org: string): string;
  /** Outcome store: hash learnerId -> compact outcome record. */
  outcomes(org: string): string;
  /** Outcome store: sorted set of learner ids with a given outcome code, scored by time of the outcome. */
  outcomeIndex(org: string, code: string): string;
  /** Outcome store: prefix of the per-bucket indexes (same slot as `outcomes`). */
  outcomeIndexPrefix(org: string): string;
  /** Learners of an organization per bucket, over all runs (hash bucket -> count). */
  orgCounts(org: string): string;
  /** Per-run bucket counters of one organization (hash bucket -> count, plus `total`). */
  runCounters(org: string, runId: string): string;
  /** Failed learners of one run in one organization (sorted set learnerId -> time of the outcome). */
  runFailures(org: string, runId: string): string;
  /**
   * Canary runs with learners awaiting approval in one organization (hash run id -> canary size), until
   * approved there: what `status` and the ETA read to name the run a person must approve.
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
  /** Numeric organization id per org key (hash), learned from --target-org-id / --org-id: the API never shows it. */
  orgIds(): string;
  /**
   * BullMQ queue of control jobs (scheduled reconciles), served by every `work` process. Its name is a
   * {hash tag}, so BullMQ's multi-key scripts work on a Redis Cluster.
   */
  controlQueueName(): string;
  /** The control queue of releases before cluster support (`control`, no hash tag): upgraded at start. */
  legacyControlQueueName(): string;
  /** Dashboard: outcomes recorded in one hour (hash outcome code -> count), expiring after two days. */
  hourly(org: string, hourIndex: number): string;
  /**
   * Per-learner lease of an organization (hash learnerId -> "holder deadline contestedAt"): at most one
   * transfer call in flight per learner. In the org's slot, so it is taken atomically with the permit.
   */
  lease(org: string): string;
  /** Audit dedupe (hash transfer id or spool entry id -> stream id): a replayed response writes once. */
  auditIds(org: string): string;
  /** BullMQ's lock of a transfer job (`${prefix}:${queue}:${jobId}:lock`), checked before a call is sent. */
  jobLock(org: string, jobId: string): string;
  /**
   * Claims across organizations (hash learnerId -> org key): a learner belongs to at most one
   * organization's work under this prefix. Its own slot: claims are taken before the org's records.
   */
  claims(): string;
  /** Version of the Redis state layout this prefix holds (upgrades run once, see app/state-upgrade.ts). */
  stateVersion(): string;
  /**
   * Append-only log of changes made through the live controls (limits, pause, priority): a stream of
   * who changed what and when (limiter/control-log.ts). Never trimmed: a few entries a day.
   */
  changes(): string;
  /**
   * Lanes with work, and when each needs a worker (sorted set: org key, or `:control`, -> ms time): the
   * producers mark a lane due now, a worker holds it with a lease time while attached, and a lane out of
   * budget waits under the time its next permit frees (worker/lanes.ts). One key in its own slot.
   */
  lanesDue(): string;
  /** Pub/sub channel: a lane was marked due (a nudge; the sorted set is the truth). */
  lanesChannel(): string;
  /**
   * Audit archive of an organization (hash: `last` = the last stream id safely in the archive files, and
   * while a write is under way `file` + `size`, the day file and its size before the write, so an exporter
   * that died mid-write is undone by the next one). In the org's slot, beside the stream it trims.
   */
  auditArchive(org: string): string;
  /** Organizations whose audit stream has entries not yet archived (set of org keys, marked on write). */
  auditUnarchived(): string;
  /** The audit archiver's lease (string: holder, with a PX expiry): one exporter at a time. */
  auditArchiveLock(): string;
  /**
   * Runs compacted after RUN_RETENTION (hash run id -> JSON summary: its metadata and per-organization
   * counters); their own keys are gone (ops/actions/run-retention.ts).
   */
  runsCompacted(): string;
  /**
   * Runs by their last operator action (sorted set run id -> time of its newest retry): with runs() by
   * creation, the runs list shows a run that was retried near the top (outcomes/runs.ts list).
   */
  runsActive(): string;
  /** The fleet's run-retention turn (a string with an expiry): one process compacts per interval. */
  runRetentionLock(): string;
  /** The personal-data retention's turn of one archive directory (by its .archive-id), with an expiry. */
  auditRetentionTurn(disk: string): string;
  /**
   * Notifications (ops/notify/notifier.ts), all under one {notify} hash tag: the claim of one event (a string
   * with an expiry, SET NX: whichever process claims it sends it, once for the fleet), the fleet check's
   * turn (one process per interval), and the organizations a worker found stuck (hash org -> "sinceMs
   * scope said": paused or blocked when it asked for a permit; removed when one of its transfers is
   * recorded).
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
