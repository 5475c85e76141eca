// run() is the CLI in process: the exit status returned, every line on the streams it is given, nothing
// left on the process (its exit code, its listeners) between runs.
import { describe, expect, it } from 'vitest';
import { runCommand } from '../helpers/cli.ts';
import { EXIT } from '../../src/cli/shared.ts';

describe('run()', () => {
  it('returns the status and writes to the streams it is given, run after run', async () => {
    const before = { exitCode: process.exitCode, sigint: process.listenerCount('SIGINT') };
    for (let i = 0; i < 2; i++) {
      const version = await runCommand(['--version'], {});
      expect(version).toEqual({ code: 0, signal: null, stdout: '0.1.0\n', stderr: '' });
      const bad = await runCommand(['status', '--no-such-flag'], {});
      expect(bad.code).toBe(EXIT.usage);
      expect(bad.stderr).toContain("unknown option '--no-such-flag'");
    }
    expect(process.exitCode).toBe(before.exitCode);
    expect(process.listenerCount('SIGINT')).toBe(before.sigint);
  });

  it('reads the configuration from the environment it is given, and says no secret of it', async () => {
    const r = await runCommand(['status'], {
      LEARNER_API_TOKENS: 'acme:in-process-secret-token',
      LIMIT_PER_TOKEN: '100 per hour',
    });
    expect(r.code).toBe(EXIT.config);
    expect(r.stderr).toContain('LIMIT_PER_TOKEN');
    expect(r.stderr + r.stdout).not.toContain('in-process-secret-token');
  });
});
