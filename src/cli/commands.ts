// The list of commands. Each command lives in its own file and exports a `register(program)`.
import type { Command } from 'commander';

export type Register = (program: Command) => void;

export const commands: Register[] = [];
