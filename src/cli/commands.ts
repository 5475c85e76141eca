// The list of commands. Each command lives in its own file and exports a `register(program)`.
import type { Command } from 'commander';
import { register as demo } from './demo.ts';
import { register as dashboard } from './dashboard.ts';
import { register as enqueue } from './enqueue.ts';
import { register as report } from './report.ts';
import { register as retry } from './retry.ts';
import { register as simulate } from './simulate.ts';
import { register as status } from './status.ts';
import { register as tokens } from './tokens.ts';
import { register as work } from './work.ts';

export type Register = (program: Command) => void;

export const commands: Register[] = [demo, enqueue, work, status, report, retry, tokens, simulate, dashboard];
