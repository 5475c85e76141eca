// The problems loadConfig names for an environment (it must refuse it).
import { expect } from 'vitest';
import { loadConfig } from '../../src/core/config.ts';
import { ConfigError } from '../../src/core/errors.ts';

export function problemsOf(env: Record<string, string>, opts = {}): string[] {
  try {
    loadConfig(env, opts);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}
