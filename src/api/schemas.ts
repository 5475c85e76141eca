// Response shapes from the spec, validated with zod. Unknown fields are tolerated (zod objects strip them
// by default); nulls are accepted wherever the spec shows null; current_page may be a number or a string.
import { z } from 'zod';

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
  // The spec shows null only; an attached user's id type is not shown, so accept a number or a string.
  userId: z.union([z.number(), z.string()]).nullable().optional(),
  reportsGenerated: z.number().int().nullable().optional(),
  v2id: z.unknown().optional(),
});
export type Learner = z.infer<typeof learnerSchema>;

export const paginationSchema = z.object({
  total: z.number().int().nonnegative(),
  per_page: intLike,
  current_page: intLike,
  last_page: z.number().int().nonnegative(),
  from: z.number().int().nullable().optional(),
  to: z.number().int().nullable().optional(),
});

export const listPageSchema = z.object({
  data: z.array(learnerSchema),
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
      assessmentIds: z.array(z.string()).default([]),
    }),
    learnerGroups: z
      .object({
        removed: z.array(learnerGroupSchema).default([]),
        added: z.array(learnerGroupSchema).default([]),
      })
      .default({ removed: [], added: [] }),
    authorizations: z
      .object({ revoked: z.array(revokedAuthorizationSchema).default([]) })
      .default({ revoked: [] }),
  }),
});
export type TransferResult = z.infer<typeof transferResultSchema>;

export const errorBodySchema = z.object({
  success: z.literal(false).optional(),
  error: z.string().optional(),
  message: z.string().optional(),
});
export type ErrorBody = z.infer<typeof errorBodySchema>;
