// The command table: each command's name, description and flags, one file each in table/. It loads
// no library but commander: an action imports the command's own file (cli/<command>.ts) when it
// runs, and that file the libraries it uses, so `--help` and a mistyped flag answer at once
// (test/unit/cli-help-loads.test.ts holds --help to a list of the modules it may load).
import type { Command } from 'commander';
import type { Cli } from './io.ts';
import { register as approve } from './table/approve.ts';
import { register as audit } from './table/audit.ts';
import { register as cancel } from './table/cancel.ts';
import { register as demo } from './table/demo.ts';
import { register as dashboard } from './table/dashboard.ts';
import { register as crawl } from './table/crawl.ts';
import { register as enqueue } from './table/enqueue.ts';
import { register as limits, registerChanges as changes } from './table/limits.ts';
import { register as pause, registerResume as resume } from './table/pause.ts';
import { register as plan } from './table/plan.ts';
import { register as reconcile } from './table/reconcile.ts';
import { register as repair } from './table/repair.ts';
import { register as report } from './table/report.ts';
import { register as retry } from './table/retry.ts';
import { register as schedule } from './table/schedule.ts';
import { register as simulate } from './table/simulate.ts';
import { register as status } from './table/status.ts';
import { register as tokens } from './table/tokens.ts';
import { register as work } from './table/work.ts';

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
