// The simulator's public types. Body field names follow docs/learner-api.md; what the spec marks
// "not shown" is our choice, documented where it is made.
import type { Rate } from '../core/duration.ts';

export interface SimOrg {
  id: number;
  key: string;
  name: string;
}

export interface SimToken {
  token: string;
  /** Organization key: transfers made with this token land in that organization. */
  org: string;
  /** Default true. False answers 403 on transfer (listing stays allowed). */
  canTransfer?: boolean;
}

/** A repeated transfer into the learner's current organization: 200 / 400 / seeded 50-50. */
export type RepeatMode = 'success' | 'error' | 'mixed';

export interface SimLimits {
  perToken?: Rate;
  perOrg?: Rate;
  window: 'rolling' | 'fixed';
  /**
   * Default true. False counts every request but refuses none, so a test can overrun on purpose
   * and check that violations() sees it.
   */
  enforce?: boolean;
}

export interface SimFaults {
  /** Uniform random delay before the request is counted and takes effect. */
  latencyBeforeMs?: [number, number];
  /** Uniform random delay after counting and effects, before the answer. */
  latencyAfterMs?: [number, number];
  /** Share of counted transfers answering 500 "Transfer failed" with no effect. */
  errorRate?: number;
  /** Share of counted transfers whose socket is destroyed, half (seeded) after the effect. */
  resetRate?: number;
  /** Share of counted transfers whose 200 body is cut in the middle (the effect is applied). */
  truncateRate?: number;
  /** Every request's socket is destroyed on arrival; nothing is counted. */
  down?: boolean;
}

export interface SimulatorOptions {
  seed?: number;
  organizations?: SimOrg[];
  learners?: number;
  tokens?: SimToken[];
  forbiddenLearnerIds?: number[];
  failingLearnerIds?: number[];
  repeatMode?: RepeatMode;
  limits?: SimLimits;
  faults?: SimFaults;
  logger?: boolean;
  /**
   * Serve HTTPS with this PEM certificate and key; with `ca` and `requestCert`, a client
   * certificate signed by `ca` is required (mutual TLS).
   */
  https?: { cert: string | Buffer; key: string | Buffer; ca?: string | Buffer; requestCert?: boolean };
}

export type RecordResult =
  | 'transferred'
  | 'repeat-success'
  | 'already-in-org'
  | 'forbidden'
  | 'not-found'
  | 'server-error'
  | 'rate-limited'
  | 'unauthorized'
  | 'listed'
  | 'down'
  /** Not in the original list: missing User-Agent, invalid page, unparsable JSON body. */
  | 'bad-request';

/** Which injected fault shaped the answer, if any (absent for a normal answer). */
export type FaultKind = 'error' | 'reset-before' | 'reset-after' | 'truncate';

export interface RequestRecord {
  seq: number;
  method: string;
  path: string;
  learnerId?: number;
  page?: number;
  /** Org key of the token; null when the token is unknown or missing. */
  org: string | null;
  /** 'acme#1': 1-based index of the token within its org. Never the token itself. */
  tokenLabel: string | null;
  receivedAt: number;
  /** The request's `traceparent` header (W3C trace context), when it had one. */
  traceparent?: string;
  /** When the request was counted against the limits (after latencyBefore); absent if never. */
  countedAt?: number;
  respondedAt?: number;
  /** HTTP status sent, 'reset' when the socket was destroyed, 0 while still in flight. */
  status: number | 'reset';
  result?: RecordResult;
  /** True when the learner changed owner in this request. */
  effectApplied: boolean;
  fault?: FaultKind;
  /** The part of a cut 200's body that was sent (fault 'truncate'): all a client can have kept. */
  partialBody?: string;
}

export interface LearnerGroup {
  id: number;
  name: string;
  description: string;
}

export interface RevokedAuthorization {
  userId: number;
  email: string;
  name: string;
  role: string;
  authorizedAt: string;
  authorizedById: number;
}

/** A learner as the list operation shows it: exactly the fields of the spec's table. */
export interface LearnerListItem {
  id: number;
  code: string;
  color: null;
  dateOfBirth: string;
  firstName: string;
  lastName: string;
  gender: number;
  isActive: number;
  createdAt: string;
  updatedAt: string;
  organizationId: number;
  parent: null;
  userId: number | null;
  reportsGenerated: number;
  v2id: null;
}

/** A learner's full state in the simulator: the list item and what a transfer changes. */
export interface SimLearner extends LearnerListItem {
  groups: LearnerGroup[];
  authorizations: RevokedAuthorization[];
  assessmentIds: string[];
}

export interface TransferDetails {
  transferId: string;
  initiatedAt: string;
  status: 'completed';
  assessmentIds: string[];
}

export interface TransferResultBody {
  success: true;
  message: string;
  data: {
    learnerId: number;
    newOwner: string;
    transferDetails: TransferDetails;
    learnerGroups: { removed: LearnerGroup[]; added: LearnerGroup[] };
    authorizations: { revoked: RevokedAuthorization[] };
  };
}

export interface ErrorBody {
  success: false;
  error: string;
  message: string;
}

export interface LimitViolation {
  scope: 'token' | 'org';
  /** Token label ('acme#1') for scope token, org key for scope org. */
  key: string;
  /** Start (ms since epoch) of the fullest offending window. */
  windowStart: number;
  windowMs: number;
  window: 'rolling' | 'fixed';
  /** Counted, non-429 transfer requests in that window. */
  count: number;
  max: number;
}
