// The transfer budget: an exact, shared Redis limiter per token and per organization (decision
// 1).
export { TransferBudget, inflightTtlFor } from './transfer-budget.ts';
export type {
  Acquired,
  BlockView,
  BudgetEvent,
  BudgetOptions,
  BudgetView,
  LearnedView,
  LearnResult,
  RefusalScope,
  Refused,
  ScopeView,
  TokenView,
} from './types.ts';
