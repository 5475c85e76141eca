// The HA and TLS files, one at a time, sharing their Redis topologies: what the serial project of
// vitest.config.ts does for them, runnable alone (`npx vitest run --config vitest.ha.config.ts`).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'test/ha/*.test.ts',
      'test/integration/redis-ha-harness.test.ts',
      'test/integration/redis-auth-tls.test.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // They kill masters of shared topologies: one file at a time.
    maxWorkers: 1,
    globalSetup: ['test/helpers/global-setup.ts', 'test/helpers/topologies-setup.ts'],
  },
});
