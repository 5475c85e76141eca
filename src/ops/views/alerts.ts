// The alerts a person must act on (a refused or paused token, a pause, a block, a Redis that does not
// take writes or is above its high-water mark), for the overview.
import type { WriteState } from '../../redis/writes.ts';
import type { OrgStatus } from './status.ts';

export interface Alert {
  level: 'error' | 'warning';
  /** null for an alert about the whole tool (Redis). */
  org: string | null;
  tokenId: string | null;
  message: string;
}

/** The banner for a Redis that does not take writes (or is above the high-water mark), first of all. */
export function redisAlert(redis: WriteState | null): Alert[] {
  if (!redis || redis.writable) return [];
  return [{ level: 'error', org: null, tokenId: null, message: redis.message }];
}

export function alertsOf(orgs: readonly OrgStatus[]): Alert[] {
  const alerts: Alert[] = [];
  for (const o of orgs) {
    // Paused by a person (`learner-transfer pause` or the controls page): no new transfer until resume.
    const paused = o.budget.org.paused;
    if (paused) {
      alerts.push({
        level: 'warning',
        org: o.org,
        tokenId: null,
        message: `organization ${o.org} is paused by ${paused.who} since ${paused.at}${paused.reason ? ` (${paused.reason})` : ''}: no new transfer is sent until it is resumed (Controls page, or 'learner-transfer resume --org ${o.org}')`,
      });
    }
    for (const t of o.budget.tokens) {
      if (!t.paused) continue;
      alerts.push({
        level: 'warning',
        org: o.org,
        tokenId: t.tokenId,
        message: `token ${t.tokenId} of ${o.org} is paused by ${t.paused.who} since ${t.paused.at}${t.paused.reason ? `: ${t.paused.reason}` : ''} (Controls page, or 'learner-transfer resume --org ${o.org} --token ${t.tokenId}')`,
      });
    }
    for (const t of o.budget.tokens) {
      if (!t.blocked) continue;
      if (t.blocked.reason === '401') {
        alerts.push({
          level: 'error',
          org: o.org,
          tokenId: t.tokenId,
          message: `token ${t.tokenId} of ${o.org} is paused: the service refused it (401). Fix LEARNER_API_TOKENS, then run 'learner-transfer tokens unpause --org ${o.org}'.`,
        });
      } else {
        const left =
          t.blocked.remainingMs === null
            ? 'until unblocked'
            : `${Math.ceil(t.blocked.remainingMs / 1000)} s left`;
        alerts.push({
          level: 'warning',
          org: o.org,
          tokenId: t.tokenId,
          message: `token ${t.tokenId} of ${o.org} is blocked (${t.blocked.reason}), ${left}`,
        });
      }
    }
    if (o.budget.org.blocked) {
      alerts.push({
        level: 'warning',
        org: o.org,
        tokenId: null,
        message: `organization ${o.org} is blocked (${o.budget.org.blocked.reason})`,
      });
    }
  }
  return alerts;
}
