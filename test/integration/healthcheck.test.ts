// bin/healthcheck.js, the image's HEALTHCHECK, against real processes: it reads the command line of the
// process it checks (PID 1 in a container; a pid here) and asks that process's own port for /healthz.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, spawnCli, waitExit } from '../helpers/cli.ts';
import { deletePrefix, newRedis, randomPrefix, REDIS_URL } from '../helpers/redis.ts';
import { freePort } from '../helpers/redis-server.ts';
import { waitFor } from '../helpers/wait.ts';

const PREFIX = randomPrefix('hc');
const redis = newRedis();
const ENV = {
  REDIS_URL,
  QUEUE_PREFIX: PREFIX,
  // Nothing is enqueued: nothing calls the service.
  LEARNER_API_BASE_URL: 'http://127.0.0.1:9',
  LEARNER_API_TOKENS: 'acme:hc-tok-1',
};

afterAll(async () => {
  await deletePrefix(redis, PREFIX);
  redis.disconnect();
});

/** Runs the healthcheck against `pid`: its exit code and what it said. */
function healthcheck(pid: number): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(ROOT, 'bin', 'healthcheck.js'), String(pid)], (err, _out, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stderr }),
    );
  });
}

async function started(child: ReturnType<typeof spawnCli>, line: string) {
  await waitFor(
    `'${line}' on stdout or stderr (or the exit)`,
    () => (child.output.stderr + child.output.stdout).includes(line) || child.exitCode !== null,
    (up) => up,
    { everyMs: 100, show: () => child.output.stderr.slice(-1000) },
  );
  expect(child.exitCode, child.output.stderr).toBeNull();
}

describe('bin/healthcheck.js', () => {
  it('is healthy while work answers /healthz on its metrics port, unhealthy when frozen or gone', async () => {
    const port = await freePort();
    const child = spawnCli(['work', '--metrics-port', String(port)], ENV);
    const exit = waitExit(child, 60_000);
    try {
      await started(child, 'workers started');
      expect(await healthcheck(child.pid!)).toEqual({ code: 0, stderr: '' });
      // A frozen event loop answers nothing: unhealthy after the check's own timeout.
      child.kill('SIGSTOP');
      const frozen = await healthcheck(child.pid!);
      child.kill('SIGCONT');
      expect(frozen.code).toBe(1);
      expect(frozen.stderr).toContain(`http://127.0.0.1:${port}/healthz did not answer 200`);
    } finally {
      child.kill('SIGCONT');
      child.kill('SIGTERM');
    }
    await exit;
    expect((await healthcheck(child.pid!)).code).toBe(1);
  }, 60_000);

  it('probes the dashboard on its port, and calls a command without a port healthy while it runs', async () => {
    const port = await freePort();
    const dash = spawnCli(['dashboard', '--port', String(port)], ENV);
    const work = spawnCli(['work', '--concurrency=1'], ENV);
    const exits = [waitExit(dash, 60_000), waitExit(work, 60_000)];
    try {
      await started(dash, 'dashboard on');
      expect(await healthcheck(dash.pid!)).toEqual({ code: 0, stderr: '' });
      await started(work, 'workers started');
      expect(await healthcheck(work.pid!)).toEqual({ code: 0, stderr: '' });
      // A frozen dashboard answers nothing: unhealthy.
      dash.kill('SIGSTOP');
      expect((await healthcheck(dash.pid!)).code).toBe(1);
    } finally {
      dash.kill('SIGCONT');
      dash.kill('SIGTERM');
      work.kill('SIGTERM');
    }
    await Promise.all(exits);
  }, 60_000);
});
