// The transfer budget: an exact, shared Redis limiter per token and per organization: it
// holds under rolling and fixed server windows alike (the spec does not say which the service uses).
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
