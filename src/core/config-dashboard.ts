// The dashboard's settings that only make sense together: TLS files in pairs, a viewer token
// beside the operator's. The messages never show a token.
import type { EnvValues } from './config-schema.ts';

/** The dashboard's TLS files come in pairs; its tokens follow dashboardTokenProblems. */
export function dashboardProblems(e: EnvValues, problems: string[]): void {
  if (Boolean(e.DASHBOARD_TLS_CERT) !== Boolean(e.DASHBOARD_TLS_KEY)) {
    problems.push(
      'DASHBOARD_TLS_CERT, DASHBOARD_TLS_KEY: set both (paths of the PEM certificate and its key) or neither',
    );
  }
  dashboardTokenProblems(e.DASHBOARD_TOKEN, e.DASHBOARD_READ_TOKEN, problems);
}

/** The viewer token needs DASHBOARD_TOKEN beside it, and must differ from it. */
function dashboardTokenProblems(
  operator: string | undefined,
  viewer: string | undefined,
  problems: string[],
): void {
  if (viewer === undefined) return;
  if (operator === undefined) {
    problems.push(
      'DASHBOARD_READ_TOKEN: needs DASHBOARD_TOKEN beside it (the operator token); without DASHBOARD_TOKEN the dashboard has no authentication, so a viewer token would protect nothing',
    );
  } else if (operator === viewer) {
    problems.push(
      'DASHBOARD_READ_TOKEN, DASHBOARD_TOKEN: the same value; the viewer token must differ from the operator token (the values are not shown)',
    );
  }
}
