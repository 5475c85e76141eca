import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/helpers/sequencer.ts';

// Projects, so that one kind can be run alone (`npx vitest run --project unit`); docs/testing.md says
// what each proves. They run in two phases (`sequence.groupOrder`; vitest takes one maxWorkers per phase):
//
// 1. unit, integration, e2e: most of the files, more at once than there are cores. Most system tests
//    spend their time waiting on compressed rate windows, not on the CPU, and orders and budgets are
//    checked from recorded timestamps and counts; the few time bounds left are ratios or have 5x headroom
//    (docs/testing.md). Their files share processes (isolate: false): a process runs file after file of
//    its project and loads the program's modules once (a fresh process a file cost 228 s of import summed
//    over the phase, 57 s shared; the phase took 276 s, 198 s shared). test/unit/isolation.test.ts holds
//    their files to leaving nothing behind.
// 2. serial, system: the load-sensitive files (chaos, the fault seeds, the browser, fairness, HA), which meet
//    work in flight, a frozen process, a failover or a live page. They get a phase of their own, a process each,
//    so that a busy machine makes them slower, not red. Most of them wait on a freeze, a refusal or a
//    lease rather than use the CPU (at four at once the CPU was half idle while the four longest ran), so
//    six run at once (the phase took 163 s at four, 129-140 s at six); one of them is often a serial file
//    waiting for its turn at the topologies (see below), whose chain of files starts with the phase.
//
// Within a phase the longest files start first (test/helpers/sequencer.ts, by test/durations.json), so that
// no long file starts last and runs on alone at the end of its phase.
const PARALLEL = Number(process.env.TEST_WORKERS ?? 4);
const SENSITIVE = Number(process.env.TEST_SENSITIVE_WORKERS ?? 6);

// The e2e files of the load-sensitive phase: the browser files (a real Chromium driven over CDP, each page
// polled for what an event should show) and fairness (one `work` shared by 50 organizations for 30 s: it
// asserts even shares, which a busy machine lowers alike; it ran last and alone, with the CPU 75-97% idle
// for its 32 s, while it asserted the throughput, now bench/fairness.ts's figure).
const SENSITIVE_E2E = ['test/e2e/*-browser.test.ts', 'test/e2e/fairness.test.ts'];

// The files that share one Redis Cluster, Sentinel setup and TLS server for the whole run (started once,
// by test/helpers/topologies-setup.ts, in the background from the start of the run) and kill its masters.
// They run one at a time, each taking its turn from the topologies' owner for the whole file, beside the
// system files.
const SERIAL = [
  'test/ha/**/*.test.ts',
  'test/integration/redis-ha-harness.test.ts',
  'test/integration/redis-auth-tls.test.ts',
  // Not a topology user: a real Prometheus, two CLIs and a run at once, kept out of the parallel groups.
  'test/integration/prometheus-scrape.test.ts',
];

const shared = {
  testTimeout: 60_000,
  hookTimeout: 60_000,
  pool: 'forks' as const,
  globalSetup: ['test/helpers/global-setup.ts'],
  setupFiles: ['test/helpers/setup-file.ts'],
};

export default defineConfig({
  test: {
    ...shared,
    sequence: { sequencer: LongestFirstSequencer },
    coverage: {
      provider: 'v8',
      include: ['src/**/*.ts'],
      reporter: ['text-summary', 'json-summary'],
      reportsDirectory: 'coverage',
      // A red run still says what it covered: the floor is read from the same report.
      reportOnFailure: true,
      // The floor: what the suite reached when it was set (lines 89.6%, statements 88.0%, functions
      // 87.5%, branches 79.5%), less a point and a half for the paths a run takes by timing (a retry, a
      // reconnect). Code added without tests lowers it and fails `npm test`.
      thresholds: { lines: 88, statements: 86, functions: 86, branches: 78 },
    },
    projects: [
      {
        test: {
          ...shared,
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/model/**/*.test.ts'],
          // A process runs unit file after unit file and loads the program's modules once, not once a file
          // (each file paid about a second of import for them). No unit file mocks a module, stubs a
          // global, changes process.env or leaves fake timers on (test/unit/isolation.test.ts holds them
          // to it); the sequencer hands them to the workers last in their phase, one after the other.
          isolate: false,
          maxWorkers: PARALLEL,
        },
      },
      {
        test: {
          ...shared,
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/security/**/*.test.ts'],
          exclude: SERIAL,
          isolate: false,
          maxWorkers: PARALLEL,
        },
      },
      {
        test: {
          ...shared,
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          exclude: SENSITIVE_E2E,
          isolate: false,
          maxWorkers: PARALLEL,
        },
      },
      {
        test: {
          ...shared,
          name: 'system',
          include: ['test/chaos/**/*.test.ts', 'test/faults/**/*.test.ts', ...SENSITIVE_E2E],
          maxWorkers: SENSITIVE,
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          ...shared,
          name: 'serial',
          include: SERIAL,
          // Starts the shared topologies in the background when the run begins; a file run alone without
          // it starts its own (test/helpers/topologies.ts).
          globalSetup: [...shared.globalSetup, 'test/helpers/topologies-setup.ts'],
          // The phase of the load-sensitive files; vitest runs a phase's projects by name, so these come
          // before the system files and wait their turns beside them, not after them, alone.
          maxWorkers: SENSITIVE,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
