// The README is part of the product: its configuration table, commands, exit codes, outcome codes and
// npm scripts are checked against the code, so it cannot drift from what the tool does.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { commands } from '../../src/cli/commands.ts';
import { Cli } from '../../src/cli/io.ts';
import { EXIT } from '../../src/cli/shared.ts';
import { ENV_VARIABLES } from '../../src/core/config.ts';
import { OUTCOME_CODES } from '../../src/outcomes/codes.ts';
import { ROOT } from '../helpers/cli.ts';

const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
};

function section(title: string): string {
  const start = readme.indexOf(`## ${title}`);
  expect(start, `README section ${title}`).toBeGreaterThanOrEqual(0);
  const end = readme.indexOf('\n## ', start + 3);
  return readme.slice(start, end === -1 ? undefined : end);
}

function tableFirstColumn(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => /^\| `?[^|-]/.test(l) && !/^\| (Variable|Code) \|/.test(l))
    .map((l) => (l.split('|')[1] ?? '').trim().replace(/`/g, ''));
}

describe('README', () => {
  it('shows the two quick-start commands', () => {
    const quick = section('Quick start');
    expect(quick).toContain('npm run demo');
    expect(quick).toContain('npm test');
  });

  it('documents exactly the configuration variables the schema reads', () => {
    expect(tableFirstColumn(section('Configuration')).sort()).toEqual([...ENV_VARIABLES].sort());
  });

  it('names only commands that exist, and documents every command', () => {
    const program = new Command();
    for (const register of commands)
      register(program, new Cli({ env: {}, stdout: process.stdout, stderr: process.stderr }));
    const names = program.commands.map((c) => c.name());
    const mentioned = new Set(
      [...readme.matchAll(/(?:npx |`)learner-transfer ([a-z][a-z-]+)/g)].map((m) => m[1] as string),
    );
    for (const headed of readme.matchAll(/^### `([a-z-]+)/gm)) mentioned.add(headed[1] as string);
    for (const m of mentioned) expect(names, `README mentions 'learner-transfer ${m}'`).toContain(m);
    for (const n of names)
      expect(readme, `command ${n} is documented`).toMatch(new RegExp(`### \`${n}[ \`]`));
  });

  it('lists the exit codes the CLI uses', () => {
    const table = section('Exit codes');
    for (const code of Object.values(EXIT)) expect(table).toMatch(new RegExp(`^\\| ${code} \\|`, 'm'));
  });

  it('lists every outcome code', () => {
    expect(tableFirstColumn(section('Outcome codes')).sort()).toEqual([...OUTCOME_CODES].sort());
  });

  it('runs only npm scripts that exist', () => {
    for (const m of readme.matchAll(/npm run ([a-z:-]+)/g)) expect(Object.keys(pkg.scripts)).toContain(m[1]);
    expect(pkg.scripts.test).toContain('vitest');
  });
});
