// Token registry: which organization a token belongs to, its non-secret label for the record
// ('acme#2' = second token of acme), its permission, and revocation.
import type { SimOrg, SimToken } from './types.ts';
import { LearnerTransferError } from '../core/errors.ts';

export interface TokenInfo {
  org: SimOrg;
  label: string;
  canTransfer: boolean;
}

export type Caller =
  | { ok: true; info: TokenInfo }
  /** `info` is set for a known but revoked token, so the record still names its org and label. */
  | { ok: false; info?: TokenInfo };

export class TokenRegistry {
  private readonly byToken = new Map<string, TokenInfo>();
  private readonly revoked = new Set<string>();

  constructor(tokens: readonly SimToken[], orgs: readonly SimOrg[]) {
    const perOrg = new Map<string, number>();
    for (const t of tokens) {
      const org = orgs.find((o) => o.key === t.org);
      if (!org)
        throw new LearnerTransferError(
          'LT_SIMULATOR_OPTIONS',
          `simulator: token for unknown organization '${t.org}'`,
        );
      if (this.byToken.has(t.token))
        throw new LearnerTransferError(
          'LT_SIMULATOR_OPTIONS',
          `simulator: a token of '${t.org}' is given twice`,
        );
      const n = (perOrg.get(org.key) ?? 0) + 1;
      perOrg.set(org.key, n);
      this.byToken.set(t.token, { org, label: `${org.key}#${n}`, canTransfer: t.canTransfer !== false });
    }
  }

  /** Resolves the Authorization header ("Bearer <token>"). */
  caller(authorization: string | undefined): Caller {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    const token = m?.[1];
    const info = token === undefined ? undefined : this.byToken.get(token);
    if (!info || token === undefined) return { ok: false };
    return this.revoked.has(token) ? { ok: false, info } : { ok: true, info };
  }

  revoke(token: string): void {
    this.revoked.add(token);
  }

  orgOf(token: string): string | undefined {
    return this.byToken.get(token)?.org.key;
  }
}
