import { defineConfig } from 'vitest/config';

// Four projects, so that one kind can be run alone (`npx vitest run --project unit`); docs/testing.md says
// what each proves. Most system tests spend their time waiting on compressed rate windows, a frozen
// process or a failover, not on the CPU (the stall file: 11 CPU-s in 83 s), so more files run at once than
// there are cores. That is safe because orders and budgets are checked from recorded timestamps and
// counts, and the few time bounds left are ratios or have 5x headroom (docs/testing.md).
const PARALLEL = Number(process.env.TEST_WORKERS ?? 4);

// The files that share one Redis Cluster, Sentinel setup and TLS server for the whole run (started once,
// by test/helpers/topologies-setup.ts) and kill its masters. They run one at a time, each taking its turn
// from the topologies' owner for the whole file, beside the files of the other projects.
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
          maxWorkers: PARALLEL,
        },
      },
      {
        test: {
          ...shared,
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/security/**/*.test.ts'],
          exclude: SERIAL,
          maxWorkers: PARALLEL,
        },
      },
      {
        test: {
          ...shared,
          name: 'system',
          include: ['test/e2e/**/*.test.ts', 'test/chaos/**/*.test.ts', 'test/faults/**/*.test.ts'],
          maxWorkers: PARALLEL,
        },
      },
      {
        test: {
          ...shared,
          // Files that measure how fast the tool serves many organizations at once: run after every other
          // file, one at a time, so that the machine's cores are theirs.
          name: 'alone',
          include: ['test/alone/**/*.test.ts'],
          maxWorkers: 1,
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
          maxWorkers: PARALLEL,
        },
      },
    ],
  },
});
