// `npm ci` on the oldest Node the package declares must print no engine warning: every package in the
// lock file (dependencies and dev dependencies alike, since CI installs both) accepts that Node. A
// dependency that moves to Node 22 (content-disposition 3 did, through @fastify/static) fails here, not
// as a warning a user reads on install.
import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
  packages: Record<string, { engines?: { node?: string } | string[]; optional?: boolean; os?: string[] }>;
};

describe('engines', () => {
  const oldest = semver.minVersion(pkg.engines.node);

  it('declares a floor', () => {
    expect(oldest?.version).toMatch(/^20\./);
  });

  it('every locked package accepts the oldest Node the package declares', () => {
    const refusing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      if (path === '' || !range) continue;
      // Platform binaries for other systems are never installed here (npm skips them by `os`).
      if (entry.optional && entry.os && !entry.os.includes(process.platform)) continue;
      if (!semver.satisfies(oldest!.version, range)) refusing.push(`${path} (node ${range})`);
    }
    expect(refusing).toEqual([]);
  });

  it('the Node running the tests is one the package declares', () => {
    expect(semver.satisfies(process.version, pkg.engines.node)).toBe(true);
  });
});
