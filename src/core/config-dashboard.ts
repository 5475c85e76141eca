// The dashboard's settings that only make sense together: its TLS files in pairs, and a viewer token that
// needs the operator's beside it and must differ from it. The messages never show a token.
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

/**
 * The viewer token beside the operator's: it needs DASHBOARD_TOKEN (without it the dashboard has no
 * authentication at all, and every local caller may act: a viewer token would protect nothing), and it
 * must differ from it (the same value would make every operator a viewer, or every viewer an operator).
 * The messages never show either value.
 */
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
