// The simulator's default world: three organizations, four tokens (one without transfer
// permission). The tokens are fixtures, not secrets: the CLI prints them for LEARNER_API_TOKENS.
import type { SimOrg, SimToken } from './types.ts';

export const DEFAULT_ORGANIZATIONS: readonly SimOrg[] = Object.freeze([
  { id: 1, key: 'acme', name: 'Acme Learning' },
  { id: 2, key: 'beta', name: 'Beta Academy' },
  { id: 3, key: 'gamma', name: 'Gamma School' },
]);

export const DEFAULT_TOKENS: readonly SimToken[] = Object.freeze([
  { token: 'sim-acme-1', org: 'acme' },
  { token: 'sim-acme-2', org: 'acme' },
  { token: 'sim-beta-1', org: 'beta' },
  { token: 'sim-gamma-readonly', org: 'gamma', canTransfer: false },
]);

export const DEFAULT_LEARNERS = 1000;
export const DEFAULT_SEED = 1;

/** The spec's per_page. */
export const PER_PAGE = 100;
