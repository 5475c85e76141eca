// The live controls on the dashboard: pause and resume an organization or one of its tokens,
// set and reset its limits, and see per organization whether it is paused (by whom, since when), the
// limits every worker applies, the learned limit and the 429s per token, and its recent change log.
//   GET  /controls[?org=KEY]            page (one organization with ?org: the script reloads its section)
//   GET  /assets/controls.js, .css      the page's script and style (same origin: the CSP forbids inline ones)
//   GET  /api/controls[?org=KEY]        the same as JSON
//   POST /api/controls/pause            {"org", "token"?}
//   POST /api/controls/resume           {"org", "token"?}
//   POST /api/controls/limits           {"org", "perOrg"?, "perToken"?, "token"?, "reserve"?}
//   POST /api/controls/limits/reset     {"org"}
// The changes go through the same functions as the CLI (limiter/policy-control.ts), which write the
// policy in Redis and append the change log entry themselves (only when something changed): this file
// never appends to the log, so every change is logged once, with dashboardActor as its author.
// Authentication and the CSRF header are checked for every POST by the server's onRequest hook; a
// read-only dashboard refuses these POSTs (403) and hides the controls.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { collectControls, orgControls, type OrgControls } from '../../ops/views/controls.ts';
import { describeChange } from '../../ops/views/limits.ts';
import { tokensOf, type Config } from '../../core/config.ts';
import { actorOf } from '../auth.ts';
import { formatRate, rateMessage, readRate, type Rate } from '../../core/duration.ts';
import { LearnerTransferError } from '../../core/errors.ts';
import { POLICY_RECHECK_MS, seedPolicy } from '../../limiter/policy.ts';
import {
  parseReserve,
  resetLimits,
  setLimits,
  setPaused,
  type LimitChange,
  type PolicyChangeResult,
} from '../../limiter/policy-control.ts';
import type { PauseInfo } from '../../limiter/types.ts';
import { TOKEN_ID_RE } from '../../limiter/token-orgs.ts';
import {
  badRequest,
  DashboardError,
  knownOrg,
  mayNotAct,
  pageContext,
  sendPage,
  type DashboardDeps,
} from '../deps.ts';
import { CONTROLS_CSS, CONTROLS_JS } from '../assets.ts';
import { controlsPage } from '../views/controls.ts';

/** What a POST answers: what was done, in words, and the organization's controls after it. */
export interface ControlResult {
  action: 'pause' | 'resume' | 'limits.set' | 'limits.reset';
  org: string;
  tokenId: string | null;
  /** False when the request asked for what was already so (nothing is written to the log then). */
  changed: boolean;
  /** Stream id of the change log entry, or null when nothing changed. */
  changeId: string | null;
  message: string;
  warnings: string[];
  controls: OrgControls;
}

// ---- request bodies: every error names the field --------------------------------------------------

const shown = (v: unknown) =>
  typeof v === 'string' ? `'${v.slice(0, 40)}'` : JSON.stringify(v)?.slice(0, 40);

function bodyOf(body: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw badRequest(
      `body: expected a JSON object with ${allowed.map((f) => `"${f}"`).join(', ')} (Content-Type: application/json)`,
    );
  }
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) {
    if (!allowed.includes(k))
      throw badRequest(`${k.slice(0, 40)}: unknown field (expected ${allowed.join(', ')})`);
  }
  return b;
}

function orgField(deps: DashboardDeps, b: Record<string, unknown>): string {
  if (b.org === undefined) throw badRequest('org: required (an organization key)');
  if (typeof b.org !== 'string') throw badRequest(`org: expected an organization key, got ${shown(b.org)}`);
  return knownOrg(deps, b.org);
}

/** A token of the organization: one of this environment's, or one the stored policy names (paused, own limit). */
async function tokenField(deps: DashboardDeps, org: string, value: unknown): Promise<string | undefined> {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || !TOKEN_ID_RE.test(value)) {
    throw badRequest(`token: expected a token id of 12 hex digits (see tokens list), got ${shown(value)}`);
  }
  const ids = tokensOf(deps.ctx.config as Config, org).map((t) => t.id);
  if (ids.includes(value)) return value;
  const policy = await deps.ctx.budget.policy(org);
  if (value in policy.tokens || value in policy.pausedTokens) return value;
  throw badRequest(`token: ${value} is not a token of '${org}' (its tokens: ${ids.join(', ') || 'none'})`);
}

function rateField(name: string, value: unknown): Rate | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') {
    throw badRequest(`${name}: expected N/DURATION like 25/2s or 1000/1d as a string, got ${shown(value)}`);
  }
  // The same parser and message as LIMIT_* and `limits set` (duration.ts readRate).
  const read = readRate(value);
  if (!read.ok) throw badRequest(rateMessage(name, value, read.why));
  return read.rate;
}

function reserveField(value: unknown): LimitChange['reserve'] {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return { count: value };
  const reserve = typeof value === 'string' ? parseReserve(value) : undefined;
  if (reserve) return reserve;
  throw badRequest(
    `reserve: expected a number of permits (like 200) or a share of the organization's limit (like "20%"), got ${shown(value)}`,
  );
}

function refuseReadOnly(deps: DashboardDeps): void {
  if (deps.readOnly) {
    throw new DashboardError(
      'LT_HTTP_READ_ONLY',
      'this dashboard runs with --read-only: pause, resume and limits are off',
    );
  }
}

/** The core's own refusals (LT_USAGE) are the client's: 400 with its message. */
async function core<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof LearnerTransferError && err.code === 'LT_USAGE') throw badRequest(err.message);
    throw err;
  }
}

const pausedBy = (p: PauseInfo) => `${p.who} since ${p.at}`;

function pauseMessage(org: string, tokenId: string | null, paused: boolean, r: PolicyChangeResult): string {
  const what = tokenId === null ? `organization '${org}'` : `token ${tokenId} of '${org}'`;
  const before = tokenId === null ? r.before.paused : (r.before.pausedTokens[tokenId] ?? null);
  if (paused && before) return `${what} was already paused by ${pausedBy(before)}`;
  if (paused)
    return `paused ${what}: no worker sends a new transfer for it from now on; calls in flight finish`;
  if (!before) return `${what} was not paused`;
  const note = tokenId !== null && r.after.paused ? ` (organization '${org}' itself is still paused)` : '';
  return `resumed ${what} (paused by ${pausedBy(before)}): workers go on within ${POLICY_RECHECK_MS / 1000} s${note}`;
}

function limitsMessage(org: string, r: PolicyChangeResult): string {
  const text = describeChange({
    before: describeLimitsShort(r.before),
    after: describeLimitsShort(r.after),
  });
  if (text === 'no change') return `${org}: limits unchanged`;
  return `${org}: ${text}; every worker applies it within ${POLICY_RECHECK_MS / 1000} s`;
}

function describeLimitsShort(p: PolicyChangeResult['after']): Record<string, unknown> {
  return {
    perOrg: p.perOrg ? formatRate(p.perOrg) : null,
    perToken: p.perToken ? formatRate(p.perToken) : null,
    ...Object.fromEntries(Object.entries(p.tokens).map(([id, rate]) => [`token ${id}`, formatRate(rate)])),
    reserve: p.reserveShare !== null ? `${p.reserve} (${p.reserveShare}%)` : p.reserve,
  };
}

export function registerControls(app: FastifyInstance, deps: DashboardDeps): void {
  const { ctx } = deps;
  const orgsOf = (q: { org?: string }) => (q.org ? [knownOrg(deps, q.org)] : [...ctx.config.orgs]);

  app.get<{ Querystring: { org?: string } }>('/controls', async (req, reply) =>
    sendPage(
      reply,
      controlsPage(
        pageContext(deps, '/controls', req),
        await collectControls(deps.ctx, orgsOf(req.query), mayNotAct(deps, req)),
      ),
    ),
  );
  app.get('/assets/controls.css', async (_req, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(CONTROLS_CSS),
  );
  app.get('/assets/controls.js', async (_req, reply) =>
    reply
      .type('text/javascript; charset=utf-8')
      .header('cache-control', 'public, max-age=300')
      .send(CONTROLS_JS),
  );
  app.get<{ Querystring: { org?: string } }>('/api/controls', async (req) =>
    collectControls(deps.ctx, orgsOf(req.query), mayNotAct(deps, req)),
  );

  app.post('/api/controls/pause', pauseRoute(deps, true));
  app.post('/api/controls/resume', pauseRoute(deps, false));
  app.post('/api/controls/limits', async (req) => setLimitsRoute(deps, req));
  app.post('/api/controls/limits/reset', async (req) => resetLimitsRoute(deps, req));
}

/** POST /api/controls/pause and /resume: an organization, or one of its tokens. */
function pauseRoute(deps: DashboardDeps, paused: boolean) {
  const { ctx } = deps;
  return async (req: FastifyRequest): Promise<ControlResult> => {
    refuseReadOnly(deps);
    const b = bodyOf(req.body, ['org', 'token']);
    const org = orgField(deps, b);
    const tokenId = (await tokenField(deps, org, b.token)) ?? null;
    const who = actorOf(req);
    // Never stored yet: the limits are seeded from LIMIT_* first, as a worker (and the CLI) would.
    await seedPolicy(ctx.redis, ctx.keys, org, ctx.config);
    const r = await core(() => setPaused(ctx.redis, ctx.keys, org, tokenId, paused, who));
    const action = paused ? 'pause' : 'resume';
    ctx.logger.info({ org, tokenId, action, changed: r.changeId !== null, who }, `dashboard ${action}`);
    const result: ControlResult = {
      action,
      org,
      tokenId,
      changed: r.changeId !== null,
      changeId: r.changeId,
      message: pauseMessage(org, tokenId, paused, r),
      warnings: [],
      controls: await orgControls(deps.ctx, org),
    };
    return result;
  };
}

/** POST /api/controls/limits: the organization's, one token's or the reserve, checked field by field. */
async function setLimitsRoute(deps: DashboardDeps, req: FastifyRequest): Promise<ControlResult> {
  const { ctx } = deps;
  refuseReadOnly(deps);
  const b = bodyOf(req.body, ['org', 'perOrg', 'perToken', 'token', 'reserve']);
  const org = orgField(deps, b);
  const perOrg = rateField('perOrg', b.perOrg);
  const perToken = rateField('perToken', b.perToken);
  const reserve = reserveField(b.reserve);
  const tokenId = await tokenField(deps, org, b.token);
  if (tokenId !== undefined && !perToken) {
    throw badRequest('perToken: required with token (the limit of that one token, like 5/2s)');
  }
  if (!perOrg && !perToken && !reserve) {
    throw badRequest('perOrg, perToken, reserve: give at least one (nothing to change)');
  }
  const change: LimitChange = {
    ...(perOrg ? { perOrg } : {}),
    ...(perToken ? { perToken } : {}),
    ...(tokenId !== undefined ? { tokenId } : {}),
    ...(reserve ? { reserve } : {}),
  };
  const who = actorOf(req);
  // What is not changed stays as stored; never stored yet, it is seeded from LIMIT_* first.
  await seedPolicy(ctx.redis, ctx.keys, org, ctx.config);
  const r = await core(() => setLimits(ctx.redis, ctx.keys, org, change, ctx.config, who));
  const warnings: string[] = [];
  const usable = r.after.perOrg ?? ctx.config.limitPerOrg;
  if (r.after.reserve >= usable.max) {
    warnings.push(
      `the reserve (${r.after.reserve}) leaves nothing of ${formatRate(usable)} to this tool: no transfer of '${org}' will be sent`,
    );
  }
  ctx.logger.info({ org, tokenId, changed: r.changeId !== null, who }, 'dashboard limits set');
  const result: ControlResult = {
    action: 'limits.set',
    org,
    tokenId: tokenId ?? null,
    changed: r.changeId !== null,
    changeId: r.changeId,
    message: limitsMessage(org, r),
    warnings,
    controls: await orgControls(deps.ctx, org),
  };
  return result;
}

/** POST /api/controls/limits/reset: back to this dashboard's LIMIT_*. */
async function resetLimitsRoute(deps: DashboardDeps, req: FastifyRequest): Promise<ControlResult> {
  const { ctx } = deps;
  refuseReadOnly(deps);
  const b = bodyOf(req.body, ['org']);
  const org = orgField(deps, b);
  const who = actorOf(req);
  const r = await core(() => resetLimits(ctx.redis, ctx.keys, org, ctx.config, who));
  ctx.logger.info({ org, changed: r.changeId !== null, who }, 'dashboard limits reset');
  const result: ControlResult = {
    action: 'limits.reset',
    org,
    tokenId: null,
    changed: r.changeId !== null,
    changeId: r.changeId,
    message: `${limitsMessage(org, r)} (reset to this dashboard's LIMIT_PER_TOKEN=${formatRate(ctx.config.limitPerToken)} LIMIT_PER_ORG=${formatRate(ctx.config.limitPerOrg)})`,
    warnings: [],
    controls: await orgControls(deps.ctx, org),
  };
  return result;
}
