// What `--help` says after a command's flags: the environment variables it reads, and its notes
// beyond the flags (an exit status of its own). The README's table says each variable in full.
import type { Command } from 'commander';
import { TOKENS_FILE_VAR } from '../core/token-file.ts';

type Entry = readonly [names: string, note: string];

const TOKENS: Entry = [
  `LEARNER_API_TOKENS`,
  `ORG:TOKEN pairs: the organizations and their tokens (or ${TOKENS_FILE_VAR}, a file of them)`,
];
const REDIS: Entry = [
  'REDIS_URL',
  'redis://[user:password@]host:6379[/db] or rediss://... (or REDIS_CLUSTER_NODES, REDIS_SENTINELS); REDIS_CONNECT_TIMEOUT',
];
const PREFIX: Entry = ['QUEUE_PREFIX', 'prefix of every Redis key (default ltx): the same as the workers'];
const LOGS: Entry = [
  'LOG_LEVEL, LOG_FORMAT',
  'how much is logged, and how: auto (plain sentences at a terminal, JSON lines otherwise), text or json',
];
const JOBS: Entry = [
  'ATTEMPTS, BACKOFF',
  "read here: fixed on each learner's job when it is enqueued; `work` follows what each job carries",
];
const LIMITS: Entry = [
  'LIMIT_PER_TOKEN, LIMIT_PER_ORG, LIMIT_BURST',
  'the limits this environment seeds (once); every process follows the limits stored in Redis',
];
const API: Entry = ['LEARNER_API_BASE_URL', 'the Learner API (USER_AGENT, REQUEST_TIMEOUT, CONNECT_TIMEOUT)'];
const CRAWL: Entry = ['CRAWL_MAX_PAGES', 'the most pages the learner list is believed to have'];

const COMMON: readonly Entry[] = [TOKENS, REDIS, PREFIX, LOGS];

/** The variables of each command beyond COMMON (a command not named here reads COMMON). */
const READS: Record<string, readonly Entry[]> = {
  enqueue: [JOBS],
  crawl: [API, CRAWL, JOBS],
  reconcile: [API, CRAWL, JOBS, ['DRIFT_REPORT_DIR', 'where a drift report goes (default out/)']],
  plan: [API, CRAWL, LIMITS, JOBS],
  retry: [JOBS],
  repair: [JOBS],
  schedule: [['SCHEDULE_DIR', 'the only directory a scheduled reconcile reads its desired file from']],
  status: [LIMITS, ['REDIS_HIGH_WATER', 'the share of maxmemory above which workers hold back']],
  limits: [LIMITS],
  work: [
    API,
    LIMITS,
    ['CONCURRENCY', 'transfers in flight per organization (--concurrency)'],
    ['SPOOL_DIR', 'where responses are kept until they are in Redis: a persistent disk'],
    [
      'ATTEMPTS, BACKOFF',
      'not read for the learners queued: each job carries those of the command that enqueued it ' +
        '(work applies its own only to the jobs it makes again); a work with other values says so',
    ],
    ['TOKENS_RELOAD_INTERVAL', `how often ${TOKENS_FILE_VAR} is read again (and on SIGHUP)`],
    [
      'LEASE_GRACE, REPAIR_INTERVAL, RUN_RETENTION',
      'lease takeover, the repair of learners left without a job, the compaction of old runs',
    ],
    [
      'REDIS_MAX_CONNECTIONS, REDIS_HIGH_WATER, REDIS_WAIT_TIMEOUT',
      'connections of this process, memory headroom, replica acknowledgements',
    ],
    ['AUDIT_ARCHIVE_DIR, AUDIT_ARCHIVE_INTERVAL', 'where and how often the audit stream is archived'],
    [
      'AUDIT_PERSONAL_RETENTION',
      'past it, e-mail addresses and names leave the audit (needs AUDIT_ARCHIVE_DIR)',
    ],
    ['SCHEDULE_DIR', 'the directory of the scheduled reconciles this process runs'],
    ['DASHBOARD_TOKEN', 'the Bearer token /metrics asks for beyond loopback (--metrics-host)'],
    [
      'OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER',
      'either turns tracing on: a span per transfer attempt, traceparent on the PATCH (docs/tracing.md)',
    ],
  ],
  dashboard: [
    LIMITS,
    ['DASHBOARD_TOKEN', 'the password of the dashboard (required beyond localhost)'],
    ['DASHBOARD_TLS_CERT, DASHBOARD_TLS_KEY', 'PEM files: with both, the dashboard serves HTTPS'],
  ],
  demo: [
    [
      'REDIS_URL',
      'a Redis to use (when nothing answers there, a throwaway redis-server if one is on the PATH)',
    ],
    LOGS,
  ],
  simulate: [],
};

/** Commands that read the variables of READS alone (they make their own organizations). */
const OWN_ONLY = new Set(['demo', 'simulate']);

/** What a command notes after its variables: exit statuses of its own. */
const NOTES: Record<string, string> = {
  status:
    'Exit status 3 (configuration) when no organization is configured: neither LEARNER_API_TOKENS nor ' +
    `${TOKENS_FILE_VAR} is set.`,
  work: 'At a terminal, a live line shows learners done, failed and waiting, the budget left and the next permit.',
};

/** `text` cut at spaces into lines of `width` at most, all but the first indented by `indent`. */
function wrap(text: string, indent: number, width: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && indent + line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  lines.push(line);
  return lines.join(`\n${' '.repeat(indent)}`);
}

/** The help text after a command's flags: "Environment:" and one line per variable (or group). */
export function environmentHelp(name: string, width = 80): string {
  const own = READS[name] ?? [];
  const entries = OWN_ONLY.has(name) ? own : [...COMMON, ...own];
  const lines: string[] = [];
  if (entries.length > 0) {
    lines.push('', "Environment (the README's configuration table says each in full):");
    const column = Math.min(24, Math.max(...entries.map(([n]) => n.length)));
    for (const [names, note] of entries) {
      const head =
        names.length > column ? `  ${names}\n  ${' '.repeat(column)}` : `  ${names.padEnd(column)}`;
      lines.push(`${head}  ${wrap(note, column + 4, width)}`);
    }
  }
  const note = NOTES[name];
  if (note) lines.push('', wrap(note, 0, width));
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}

/** Adds the environment help to each command of the program, subcommands too. */
export function addEnvironmentHelp(program: Command): void {
  const add = (command: Command, name: string) => {
    const text = environmentHelp(name);
    if (text) command.addHelpText('after', text);
    for (const sub of command.commands) add(sub, name);
  };
  for (const command of program.commands) add(command, command.name());
}
