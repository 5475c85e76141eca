// Builds a full pipeline (config, context, simulator) for end-to-end tests, with a log that is captured
// so tests can scan it for tokens.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createContext, type AppContext } from '../../src/app.ts';
import { loadConfig, secretsOf, type Config } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { createSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.ts';
import { deletePrefix, newRedis, randomPrefix, REDIS_URL } from './redis.ts';

export interface Harness {
  sim: Simulator;
  ctx: AppContext;
  config: Readonly<Config>;
  env: Record<string, string>;
  logLines: string[];
  prefix: string;
  dir: string;
  writeFile(name: string, text: string): string;
  close(): Promise<void>;
}

export async function startHarness(
  options: {
    sim?: SimulatorOptions;
    env?: Record<string, string>;
    tag?: string;
    /** A Redis of the test's own (default: the shared REDIS_URL). */
    redisUrl?: string;
    /** The API base URL the workers use (default: the simulator's; a proxy in front of it, say). */
    baseUrl?: (simUrl: string) => string | Promise<string>;
  } = {},
): Promise<Harness> {
  const sim = createSimulator(options.sim ?? {});
  await sim.listen();
  const prefix = randomPrefix(options.tag ?? 'e2e');
  const env: Record<string, string> = {
    REDIS_URL: options.redisUrl ?? REDIS_URL,
    QUEUE_PREFIX: prefix,
    LEARNER_API_BASE_URL: options.baseUrl ? await options.baseUrl(sim.url) : sim.url,
    LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2',
    LIMIT_PER_TOKEN: '20/2s',
    LIMIT_PER_ORG: '60/4s',
    REQUEST_TIMEOUT: '1500ms',
    CONNECT_TIMEOUT: '500ms',
    BACKOFF: '50ms',
    ATTEMPTS: '4',
    CONCURRENCY: '10',
    LOG_LEVEL: 'debug',
    ...options.env,
  };
  const config = loadConfig(env, { requireBaseUrl: true, requireTokens: true });
  const logLines: string[] = [];
  const logger = createLogger({
    level: 'debug',
    secrets: secretsOf(config),
    destination: { write: (line: string) => void logLines.push(line) },
  });
  const redis = newRedis(options.redisUrl);
  const ctx = await createContext(config, { logger, redis });
  const dir = mkdtempSync(join(tmpdir(), 'lt-e2e-'));
  return {
    sim,
    ctx,
    config,
    env,
    logLines,
    prefix,
    dir,
    writeFile(name, text) {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    },
    async close() {
      await ctx.close();
      await deletePrefix(redis, prefix);
      await redis.quit();
      await sim.close();
    },
  };
}
