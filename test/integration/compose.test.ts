// docker-compose.yml and the Dockerfile, checked without a Docker engine: the compose file validates
// (docker-compose config -q, Debian package docker-compose) and keeps the promises the README makes.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';

function compose(args: string[]): string {
  const which = spawnSync('docker-compose', ['--version'], { encoding: 'utf8' });
  if (which.status !== 0) {
    throw new Error('docker-compose is not installed: apt-get install -y docker-compose (.ci/run does this)');
  }
  // No .env and no token in the environment: the file must still validate with its defaults.
  return execFileSync('docker-compose', args, {
    cwd: ROOT,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

describe('docker-compose.yml', () => {
  it('validates, with and without the demo profile', () => {
    expect(compose(['config', '-q'])).toBe('');
    expect(compose(['--profile', 'demo', 'config', '-q'])).toBe('');
  });

  it('runs Redis with AOF and noeviction, workers and a loopback-only dashboard', () => {
    const text = compose(['config']);
    expect(text).toMatch(/- --appendonly\s*\n\s*- "?yes"?/);
    expect(text).toContain('noeviction');
    expect(text).toMatch(/worker:/);
    expect(text).toMatch(/127\.0\.0\.1/);
    // Real tokens come from the environment or .env, never from the file: with none set they are empty.
    // (The demo profile carries the simulator's fixture tokens, which are not secrets.)
    expect(text).not.toContain('replace-with');
    const worker = text.slice(text.indexOf('\n  worker:'));
    expect(worker).toMatch(/LEARNER_API_TOKENS: ''/);
    const demo = compose(['--profile', 'demo', 'config']);
    expect(demo).toMatch(/simulator:/);
    expect(demo).toMatch(/demo-producer:/);
  });
});

describe('Dockerfile', () => {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  it('is multi-stage and runs as a non-root user', () => {
    expect(text.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    expect(text).toMatch(/^USER node$/m);
    expect(text).toMatch(/npm run build/);
  });
  it('never bakes a secret into the image', () => {
    expect(text).not.toMatch(/LEARNER_API_TOKENS|DASHBOARD_TOKEN/);
    expect(readFileSync(join(ROOT, '.dockerignore'), 'utf8')).toMatch(/^\.env$/m);
  });
});
