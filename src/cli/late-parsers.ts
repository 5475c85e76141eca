// The flag parsers whose rules live in modules that load a library (the limiter's policy:
// ioredis). The command table does not import them: it reads these flags as text and checks them
// once the flags are read, before the action (table/late.ts), in commander's own words.
import { InvalidArgumentError } from 'commander';
import { parseReserve, type LimitChange } from '../limiter/policy-control.ts';

/** --reserve: a number of permits, or a share of the organization's limit. */
export function reserveOption(value: string): NonNullable<LimitChange['reserve']> {
  const reserve = parseReserve(value);
  if (reserve) return reserve;
  throw new InvalidArgumentError(
    `--reserve expects a number of permits (like 200) or a share of the organization's limit (like 20%), got '${value}'`,
  );
}

export const LATE_PARSERS = { reserve: reserveOption };
export type LateParser = keyof typeof LATE_PARSERS;
