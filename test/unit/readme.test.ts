// The README is part of the product: its configuration table, commands, exit codes, outcome codes and
// npm scripts are checked against the code, so it cannot drift from what the tool does. The README is a
// short entry page; the reference moved to docs/ (every variable in docs/configuration.md, every command
// in docs/commands.md) and is checked there, with every link between them.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { commands } from '../../src/cli/commands.ts';
import { Cli } from '../../src/cli/io.ts';
import { EXIT } from '../../src/cli/shared.ts';
import { ENV_VARIABLES } from '../../src/core/config.ts';
import { OUTCOME_CODES } from '../../src/outcomes/codes.ts';
import { ROOT } from '../helpers/cli.ts';

const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const configurationDoc = readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8');
const commandsDoc = readFileSync(join(ROOT, 'docs/commands.md'), 'utf8');
const docs = readdirSync(join(ROOT, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => join('docs', f));

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(text: string): Set<string> {
  const out = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = !fenced && /^#{1,6} (.+)$/.exec(line);
    if (m) out.add(anchorOf(m[1] as string));
  }
  return out;
}
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
};

function section(title: string, text = readme): string {
  const start = text.indexOf(`## ${title}`);
  expect(start, `README section ${title}`).toBeGreaterThanOrEqual(0);
  const end = text.indexOf('\n## ', start + 3);
  return text.slice(start, end === -1 ? undefined : end);
}

function tableFirstColumn(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => /^\| `?[^|-]/.test(l) && !/^\| (Variable|Code|Command|Topic) \|/.test(l))
    .map((l) => (l.split('|')[1] ?? '').trim().replace(/`/g, ''));
}

describe('README', () => {
  it('shows the two quick-start commands', () => {
    const quick = section('Quick start');
    expect(quick).toContain('npm run demo');
    expect(quick).toContain('npm test');
  });

  it('names every Debian package that CI installs for the tests', () => {
    const ci = readFileSync(join(ROOT, '.ci/run'), 'utf8');
    const packages = [...ci.matchAll(/need_apt\+=\(([a-z-]+)\)/g)].map((m) => m[1] as string);
    expect(packages.length).toBeGreaterThanOrEqual(5);
    const quick = section('Quick start');
    for (const p of packages) expect(quick, `Debian package ${p}`).toContain(`\`${p}\``);
  });

  it('is a short entry page with a table of contents whose links all land', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
    const contents = section('Contents');
    const anchors = anchorsOf(readme);
    const entries = [...contents.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1] as string);
    expect(entries.length).toBeGreaterThanOrEqual(8);
    for (const a of entries) expect(anchors, `contents entry #${a}`).toContain(a);
    // Every section of the README is in the contents.
    for (const h of readme.matchAll(/^## (.+)$/gm))
      if (h[1] !== 'Contents') expect(entries).toContain(anchorOf(h[1] as string));
  });

  it('documents exactly the configuration variables the schema reads (docs/configuration.md)', () => {
    expect(tableFirstColumn(configurationDoc).sort()).toEqual([...ENV_VARIABLES].sort());
    // The README's short table names only variables that exist.
    for (const cell of tableFirstColumn(section('Configuration')))
      for (const name of cell.split(', ')) expect(ENV_VARIABLES).toContain(name);
  });

  it('every relative link of the README and docs/ points at a file that exists, and at a heading in it', () => {
    for (const file of ['README.md', ...docs]) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = m[1] as string;
        if (/^[a-z]+:/.test(link)) continue;
        const [path, anchor] = link.split('#') as [string, string | undefined];
        const target = path === '' ? join(ROOT, file) : resolve(ROOT, dirname(file), path);
        expect(existsSync(target), `${file}: link ${link}`).toBe(true);
        if (anchor && target.endsWith('.md'))
          expect(anchorsOf(readFileSync(target, 'utf8')), `${file}: link ${link}`).toContain(anchor);
      }
    }
  });

  it('names only commands that exist, and documents every command', () => {
    const program = new Command();
    // One Cli for the table, its listeners off process.stdout after: the next file of this process (the
    // unit files share one) must not inherit eleven of them.
    const cli = new Cli({ env: {}, stdout: process.stdout, stderr: process.stderr });
    for (const register of commands) register(program, cli);
    cli.dispose();
    const names = program.commands.map((c) => c.name());
    const mentioned = new Set(
      [...readme.matchAll(/(?:npx |`)learner-transfer ([a-z][a-z-]+)/g)].map((m) => m[1] as string),
    );
    for (const m of commandsDoc.matchAll(/(?:npx |`)learner-transfer ([a-z][a-z-]+)/g))
      mentioned.add(m[1] as string);
    for (const headed of commandsDoc.matchAll(/^## `([a-z-]+)/gm)) mentioned.add(headed[1] as string);
    const tabled = tableFirstColumn(section('Commands')).flatMap((c) => c.split(', '));
    for (const m of [...mentioned, ...tabled])
      expect(names, `README or docs/commands.md mentions 'learner-transfer ${m}'`).toContain(m);
    for (const n of names) {
      expect(tabled, `command ${n} is in the README's table`).toContain(n);
      expect(commandsDoc, `command ${n} is documented`).toMatch(new RegExp(`^## \`(.*, )?\`?${n}[ \`]`, 'm'));
    }
  });

  it("runs the first migration's steps in a person's order (test/e2e/first-migration.test.ts runs it)", () => {
    const block = /```sh\n([\s\S]*?)```/.exec(section('A first real migration'))?.[1] ?? '';
    const steps = [
      'export LEARNER_API_TOKENS_FILE=',
      'export USER_AGENT=',
      'export SPOOL_DIR=',
      'export AUDIT_ARCHIVE_DIR=',
      'learner-transfer plan --csv cohort.csv',
      'learner-transfer plan --check --csv cohort.csv --org acme --target-org-id',
      'learner-transfer plan --check --apply --csv cohort.csv',
      'learner-transfer work',
    ];
    const at = steps.map((step) => block.indexOf(step));
    for (const [i, step] of steps.entries()) expect(at[i], step).toBeGreaterThanOrEqual(0);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    // What the check found not worth a call is never sent by a plain enqueue in the path.
    expect(block).not.toMatch(/learner-transfer enqueue /);
  });

  it('lists the exit codes the CLI uses', () => {
    const table = section('Exit codes');
    for (const code of Object.values(EXIT)) expect(table).toMatch(new RegExp(`^\\| ${code} \\|`, 'm'));
  });

  it('lists every outcome code', () => {
    expect(tableFirstColumn(section('Outcome codes')).sort()).toEqual([...OUTCOME_CODES].sort());
  });

  it('runs only npm scripts that exist', () => {
    const texts = [readme, ...docs.map((f) => readFileSync(join(ROOT, f), 'utf8'))];
    for (const m of texts.join('\n').matchAll(/npm run ([a-z:-]+)/g))
      expect(Object.keys(pkg.scripts)).toContain(m[1]);
    expect(pkg.scripts.test).toContain('vitest');
  });
});
