// The `simulate` command: flags become simulator options, bad values are named, and a started simulator
// prints what to paste into the environment.
import { Command, CommanderError } from 'commander';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { Cli } from '../../src/cli/io.ts';
import { simulatorOptions, startSimulator, type SimulateFlags } from '../../src/cli/simulate.ts';
import { register } from '../../src/cli/table/simulate.ts';
import { LearnerTransferError } from '../../src/core/errors.ts';

async function parseError(args: string[]): Promise<string> {
  let stderr = '';
  const program = new Command('learner-transfer')
    .exitOverride()
    .configureOutput({ writeErr: (s) => (stderr += s), writeOut: () => undefined });
  // Its listeners leave process.stdout after: the next file of this process must not inherit them.
  const cli = new Cli({ env: {}, stdout: process.stdout, stderr: process.stderr });
  register(program, cli);
  const err = await program
    .parseAsync(['simulate', ...args], { from: 'user' })
    .then(
      () => undefined,
      (e: unknown) => e,
    )
    .finally(() => cli.dispose());
  expect(err).toBeInstanceOf(CommanderError);
  return stderr;
}

const base: SimulateFlags = { port: 0, host: '127.0.0.1', window: 'rolling' };

describe('simulate command', () => {
  it.each([
    [['--limit-per-token', '100 per hour'], /--limit-per-token expects N\/DURATION.*'100 per hour'/],
    [['--limit-per-org', '0/1d'], /--limit-per-org expects N\/DURATION/],
    [['--port', '70000'], /--port expects a whole number from 0 to 65535, got '70000'/],
    [['--learners', 'many'], /--learners expects a whole number/],
    [['--error-rate', '1.5'], /--error-rate expects a share from 0 to 1/],
    [['--latency', '200-20'], /--latency expects MIN-MAX/],
    [['--repeat-mode', 'sometimes'], /--repeat-mode.*sometimes.*success, error, mixed/],
    [['--window', 'sliding'], /--window.*sliding.*rolling, fixed/],
  ])('names the flag of a bad value: %j', async (args, message) => {
    expect(await parseError(args)).toMatch(message);
  });

  it('turns flags into options: limits, latency split around counting, fault shares', () => {
    const options = simulatorOptions({
      ...base,
      learners: 20,
      seed: 9,
      repeatMode: 'mixed',
      limitPerToken: { max: 100, windowMs: 4000 },
      window: 'fixed',
      latency: [20, 200],
      errorRate: 0.1,
      resetRate: 0.05,
    });
    expect(options).toEqual({
      learners: 20,
      seed: 9,
      repeatMode: 'mixed',
      limits: { window: 'fixed', perToken: { max: 100, windowMs: 4000 } },
      faults: { latencyBeforeMs: [10, 100], latencyAfterMs: [10, 100], errorRate: 0.1, resetRate: 0.05 },
    });
    expect(simulatorOptions(base).limits).toBeUndefined();
    expect(() => simulatorOptions({ ...base, errorRate: 0.6, truncateRate: 0.6 })).toThrow(
      LearnerTransferError,
    );
  });

  it('starts a simulator that answers, and prints its URL and pasteable tokens', async () => {
    const lines: string[] = [];
    const sim = await startSimulator(
      { ...base, learners: 12, limitPerToken: { max: 5, windowMs: 4000 } },
      (l) => lines.push(l),
    );
    try {
      const out = lines.join('\n');
      expect(out).toContain(`LEARNER_API_BASE_URL=${sim.url}`);
      expect(out).toContain('LEARNER_API_TOKENS=acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1');
      expect(out).toContain('gamma:sim-gamma-readonly has no transfer permission');
      expect(out).toContain('5/4s per token (rolling window)');
      const res = await request(`${sim.url}/1/learner`, {
        headers: { 'user-agent': 'cli-test', authorization: 'Bearer sim-acme-1' },
      });
      expect(res.statusCode).toBe(200);
      expect(((await res.body.json()) as { pagination: { total: number } }).pagination.total).toBe(12);
    } finally {
      await sim.close();
    }
  });

  it('names the port when it cannot listen', async () => {
    const first = await startSimulator(base, () => undefined);
    try {
      const port = Number(new URL(first.url).port);
      await expect(startSimulator({ ...base, port }, () => undefined)).rejects.toMatchObject({
        code: 'LT_USAGE',
        message: expect.stringMatching(
          new RegExp(`--port/--host: cannot listen on 127.0.0.1:${port} \\(EADDRINUSE\\)`),
        ),
      });
    } finally {
      await first.close();
    }
  });
});
