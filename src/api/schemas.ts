// Response shapes from the spec, validated with zod: unknown fields are stripped, nulls
// accepted where the spec shows null.
import * as z from 'zod';

/**
 * The most elements each response array may hold, checked before zod runs (which builds one
 * issue per bad element: 2M would cost seconds and gigabytes) and again by `.max()`.
 */
export const MAX_ITEMS = {
  /** data of a list page: 5 x the spec's per_page of 100. */
  listData: 500,
  assessmentIds: 10_000,
  learnerGroups: 1_000,
  revoked: 1_000,
} as const;

const intLike = z.union([z.number().int(), z.string().regex(/^\d+$/).transform(Number)]);

export const learnerSchema = z.object({
  id: z.number().int(),
  code: z.string().nullable().optional(),
  color: z.unknown().optional(),
  dateOfBirth: z.string().nullable().optional(),
  firstName: z.string().nullable().optional(),
  lastName: z.string().nullable().optional(),
  gender: z.number().int().nullable().optional(),
  isActive: z.number().int().nullable().optional(),
  createdAt: z.string().nullable().optional(),
  updatedAt: z.string().nullable().optional(),
  organizationId: z.number().int(),
  parent: z.unknown().optional(),
  // The spec shows null only; an attached user's id type is not shown: a number or a string.
  userId: z.union([z.number(), z.string()]).nullable().optional(),
  reportsGenerated: z.number().int().nullable().optional(),
  v2id: z.unknown().optional(),
});
export type Learner = z.infer<typeof learnerSchema>;

/** The spec: a transfer is only for learners created with a user attached. */
export function hasUser(l: Learner): boolean {
  return l.userId !== null && l.userId !== undefined && l.userId !== '';
}

/** The spec shows isActive 1 for an active learner; only 1 is active. */
export function isActiveLearner(l: Learner): boolean {
  return l.isActive === 1;
}

export const paginationSchema = z.object({
  total: z.number().int().nonnegative(),
  per_page: intLike,
  current_page: intLike,
  last_page: z.number().int().nonnegative(),
  from: z.number().int().nullable().optional(),
  to: z.number().int().nullable().optional(),
});

export const listPageSchema = z.object({
  data: z.array(learnerSchema).max(MAX_ITEMS.listData),
  pagination: paginationSchema,
});
export type ListPage = z.infer<typeof listPageSchema>;

export const learnerGroupSchema = z.object({
  id: z.number().int(),
  name: z.string(),
  description: z.string().nullable().optional(),
});

export const revokedAuthorizationSchema = z.object({
  userId: z.number().int(),
  email: z.string(),
  name: z.string().nullable().optional(),
  role: z.string().nullable().optional(),
  authorizedAt: z.string().nullable().optional(),
  authorizedById: z.number().int().nullable().optional(),
});

export const transferResultSchema = z.object({
  success: z.literal(true),
  message: z.string().optional(),
  data: z.object({
    learnerId: z.number().int(),
    newOwner: z.string(),
    transferDetails: z.object({
      transferId: z.string().min(1),
      initiatedAt: z.string(),
      status: z.string(),
      assessmentIds: z.array(z.string()).max(MAX_ITEMS.assessmentIds).default([]),
    }),
    learnerGroups: z
      .object({
        removed: z.array(learnerGroupSchema).max(MAX_ITEMS.learnerGroups).default([]),
        added: z.array(learnerGroupSchema).max(MAX_ITEMS.learnerGroups).default([]),
      })
      .default({ removed: [], added: [] }),
    authorizations: z
      .object({ revoked: z.array(revokedAuthorizationSchema).max(MAX_ITEMS.revoked).default([]) })
      .default({ revoked: [] }),
  }),
});
export type TransferResult = z.infer<typeof transferResultSchema>;

/** `value[key]` when value is a plain object, else undefined. */
function field(value: unknown, key: string): unknown {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)[key]
    : undefined;
}

function tooLong(value: unknown, max: number, name: string): string | undefined {
  return Array.isArray(value) && value.length > max
    ? `${name} holds ${value.length} elements, over the cap of ${max}`
    : undefined;
}

/**
 * The arrays of a transfer result, measured before zod: a message naming the first over its
 * cap, or undefined.
 */
export function transferArrayProblem(body: unknown): string | undefined {
  const data = field(body, 'data');
  const groups = field(data, 'learnerGroups');
  return (
    tooLong(
      field(field(data, 'transferDetails'), 'assessmentIds'),
      MAX_ITEMS.assessmentIds,
      'data.transferDetails.assessmentIds',
    ) ??
    tooLong(field(groups, 'removed'), MAX_ITEMS.learnerGroups, 'data.learnerGroups.removed') ??
    tooLong(field(groups, 'added'), MAX_ITEMS.learnerGroups, 'data.learnerGroups.added') ??
    tooLong(field(field(data, 'authorizations'), 'revoked'), MAX_ITEMS.revoked, 'data.authorizations.revoked')
  );
}

/** The same for a list page: `data` over the cap, or undefined. */
export function listArrayProblem(body: unknown): string | undefined {
  return tooLong(field(body, 'data'), MAX_ITEMS.listData, 'data');
}
