// docker-compose.yml and the Dockerfile, checked without a Docker engine: the compose file validates
// (docker-compose config -q, Debian package docker-compose) and keeps the promises the README makes; the
// image runs as a non-root user on a read-only root filesystem, every place it writes is a volume, and
// its HEALTHCHECK needs nothing but node (docs/operations.md).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';

const DATA = '/var/lib/learner-transfer';

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

  it('runs every service of the image read-only, without capabilities, writing only to volumes', () => {
    type Service = {
      image?: string;
      read_only?: boolean;
      tmpfs?: string[];
      cap_drop?: string[];
      command?: string[];
      environment?: Record<string, string>;
      volumes?: string[];
    };
    const text = compose(['--profile', 'demo', '--profile', 'ha', 'config']);
    const services = (parse(text) as { services: Record<string, Service> }).services;
    const ours = Object.entries(services).filter(([, s]) => s.image === 'learner-transfer:local');
    expect(ours.map(([n]) => n)).toEqual(
      expect.arrayContaining(['worker', 'dashboard', 'demo-worker', 'demo-producer', 'worker-ha']),
    );
    for (const [name, s] of ours) {
      expect(s.read_only, name).toBe(true);
      expect(s.tmpfs, name).toContain('/tmp');
      expect(s.cap_drop, name).toEqual(['ALL']);
      const mounts = (s.volumes ?? []).map((v) => v.split(':')[1]);
      const command = s.command?.[0];
      if (command === 'work') {
        // The spool on a volume, wherever SPOOL_DIR points (the image's default when unset), and a
        // metrics port for the HEALTHCHECK to probe.
        expect(mounts, name).toContain(s.environment?.SPOOL_DIR ?? `${DATA}/spool`);
        expect(s.command, name).toContain('--metrics-port');
      }
      if (command === 'enqueue') {
        // Rejects go to out/ (relative to the working directory, the image's data directory).
        expect(mounts, name).toContain(`${DATA}/out`);
        const csv = s.command?.[s.command.indexOf('--csv') + 1] ?? '';
        expect(csv.startsWith('/app/'), `${name} reads ${csv} from the image`).toBe(true);
        expect(existsSync(join(ROOT, csv.slice('/app/'.length)))).toBe(true);
      }
    }
    expect(services.worker?.volumes?.map((v) => v.split(':')[1])).toEqual(
      expect.arrayContaining([`${DATA}/spool`, `${DATA}/out`, `${DATA}/audit`]),
    );
  });
});

describe('Dockerfile', () => {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  it('is multi-stage and runs as a non-root user', () => {
    expect(text.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    expect(text).toMatch(/^USER node$/m);
    expect(text).toMatch(/npm run build/);
  });
  // The final stage: what the running container gets.
  const runtime = text.slice(text.lastIndexOf('\nFROM '));
  it('runs as node on a read-only root: code root-owned in /app, every write under the data volumes', () => {
    expect(runtime.match(/^USER .*/gm)).toEqual(['USER node']);
    // The code is not the process's to change: nothing copied into /app is chowned to it.
    expect(runtime).not.toMatch(/^COPY .*--chown/m);
    // Relative paths (out/<run>, the default spool) resolve on the volumes, not in the image.
    expect(runtime.match(/^WORKDIR .*/gm)?.pop()).toBe(`WORKDIR ${DATA}`);
    const volume = /^VOLUME (\[.*\])$/m.exec(runtime);
    expect(JSON.parse(volume?.[1] ?? '[]')).toEqual([`${DATA}/spool`, `${DATA}/out`, `${DATA}/audit`]);
    expect(runtime).toMatch(new RegExp(`SPOOL_DIR=${DATA}/spool`));
    // Each volume directory exists in the image, owned by node: a fresh volume starts with that owner.
    expect(runtime).toMatch(new RegExp(`mkdir -p ${DATA}/spool ${DATA}/out ${DATA}/audit`));
    expect(runtime).toMatch(new RegExp(`chown -R node:node ${DATA}`));
    expect(runtime).toMatch(/^ENTRYPOINT \["node", "\/app\/bin\/learner-transfer\.js"\]$/m);
  });
  it('has a HEALTHCHECK that needs only node (slim images have no curl)', () => {
    const check = /^HEALTHCHECK .*CMD (\[.*\])$/m.exec(runtime);
    expect(JSON.parse(check?.[1] ?? '[]')).toEqual(['node', '/app/bin/healthcheck.js']);
    const instructions = runtime.split('\n').filter((l) => !l.startsWith('#'));
    expect(instructions.join('\n')).not.toMatch(/curl|wget/);
    expect(existsSync(join(ROOT, 'bin', 'healthcheck.js'))).toBe(true);
    expect(runtime).toMatch(/^COPY bin \.\/bin$/m);
  });
  it('never bakes a secret into the image', () => {
    expect(text).not.toMatch(/LEARNER_API_TOKENS|DASHBOARD_TOKEN/);
    expect(readFileSync(join(ROOT, '.dockerignore'), 'utf8')).toMatch(/^\.env$/m);
  });
});
