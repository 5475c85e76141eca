// One side of the enqueue benchmark, in its own process so its peak RSS is its own:
//   mode=producer: enqueue --csv through the real producer (CSV stream, validation, dedupe, outcome seed)
//   mode=raw:      plain addBulk of the same ids with the same job options and ids (the baseline)
import { Queue } from 'bullmq';
import { createContext } from '../src/app/context.ts';
import { loadConfig } from '../src/core/config.ts';
import { createLogger } from '../src/core/log.ts';
import { enqueueCsv } from '../src/queue/enqueue-csv.ts';
import { JOB_NAME, jobIdOf } from '../src/queue/job.ts';
import { defaultJobOptions } from '../src/queue/queues.ts';
import { createKeys } from '../src/core/keys.ts';
import { createRedis } from '../src/redis/client.ts';

const mode = process.env.BENCH_MODE;
const rows = Number(process.env.BENCH_ROWS);
const file = process.env.BENCH_CSV ?? '';
const env = {
  REDIS_URL: process.env.REDIS_URL,
  QUEUE_PREFIX: process.env.QUEUE_PREFIX,
  LEARNER_API_TOKENS: 'acme:bench-token',
};
const config = loadConfig(env);
const started = performance.now();

if (mode === 'raw') {
  const redis = createRedis(config.redis);
  const keys = createKeys(config.queuePrefix);
  const queue = new Queue(keys.queueName('acme'), {
    connection: redis,
    prefix: keys.prefix,
    defaultJobOptions: defaultJobOptions(config),
  });
  for (let start = 1; start <= rows; start += 1000) {
    const jobs = [];
    for (let id = start; id < start + 1000 && id <= rows; id++) {
      jobs.push({
        name: JOB_NAME,
        data: { org: 'acme', learnerId: id, runId: 'raw', source: `raw:${id}` },
        opts: { jobId: jobIdOf(id) },
      });
    }
    await queue.addBulk(jobs);
  }
  await queue.close();
  await redis.quit();
} else {
  const ctx = await createContext(config, { logger: createLogger({ level: 'error' }) });
  await ctx.runs.create({ id: 'bench', kind: 'csv', source: file, orgs: ['acme'] });
  const s = await enqueueCsv(
    { producer: ctx.producer, runs: ctx.runs },
    {
      file,
      defaultOrg: 'acme',
      knownOrgs: config.orgs,
      runId: 'bench',
      rejectsFile: '/tmp/lt-bench-rejects.csv',
    },
  );
  if (s.enqueued !== rows) throw new Error(`expected ${rows} enqueued, got ${s.enqueued}`);
  await ctx.close();
}
const ms = performance.now() - started;
process.stdout.write(`${JSON.stringify({ ms, maxRssKb: process.resourceUsage().maxRSS })}\n`);
