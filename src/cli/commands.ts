// The list of commands. Each command lives in its own file and exports a `register(program)`.
import type { Command } from 'commander';
import type { Cli } from './io.ts';
import { register as approve } from './approve.ts';
import { register as audit } from './audit.ts';
import { register as cancel } from './cancel.ts';
import { register as demo } from './demo.ts';
import { register as dashboard } from './dashboard.ts';
import { register as crawl } from './crawl.ts';
import { register as enqueue } from './enqueue.ts';
import { register as limits, registerChanges as changes } from './limits.ts';
import { register as pause, registerResume as resume } from './pause.ts';
import { register as plan } from './plan.ts';
import { register as reconcile } from './reconcile.ts';
import { register as repair } from './repair.ts';
import { register as report } from './report.ts';
import { register as retry } from './retry.ts';
import { register as schedule } from './schedule.ts';
import { register as simulate } from './simulate.ts';
import { register as status } from './status.ts';
import { register as tokens } from './tokens.ts';
import { register as work } from './work.ts';

export type Register = (program: Command, cli: Cli) => void;

export const commands: Register[] = [
  demo,
  enqueue,
  crawl,
  reconcile,
  plan,
  schedule,
  work,
  status,
  report,
  audit,
  retry,
  cancel,
  approve,
  repair,
  tokens,
  limits,
  pause,
  resume,
  changes,
  simulate,
  dashboard,
];
