// Text from the service reaches a terminal only without control characters: an OSC 52 sequence would
// write the clipboard, ESC [ 2J clear the screen. The stripper itself, and `report` to stdout through
// the real CLI with a record whose message holds both.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newRunId } from '../../src/outcomes/runs.ts';
import { forTerminal, jsonForTerminal } from '../../src/core/terminal-safe.ts';
import { runCommand } from '../helpers/cli.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';

const OSC52 = '\u001b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\u0007';
const CLEAR = '\u001b[2J';
/** Any character a terminal acts on, but \n and \t. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

describe('forTerminal', () => {
  it('removes escape sequences whole and every other control character', () => {
    expect(forTerminal(`learner gone${OSC52}${CLEAR} [done]`)).toBe('learner gone [done]');
    expect(forTerminal('\u001b]0;title\u001b\\x')).toBe('x'); // OSC ended by ST
    expect(forTerminal('\u001b[31mred\u001b[0m')).toBe('red');
    expect(forTerminal('a\u009b2Jb\u009d52;c;x\u009cc')).toBe('abc'); // 8-bit CSI and OSC
    expect(forTerminal('over\rwrite\bback\u0000nul\u007fdel')).toBe('overwritebacknuldel');
    expect(forTerminal('a\u202eevil\u2066b')).toBe('aevilb'); // bidi overrides reorder text
    expect(forTerminal('\u001b')).toBe('');
    expect(forTerminal('lines\nand\ttabs stay')).toBe('lines\nand\ttabs stay');
    expect(forTerminal('one\nline\tonly', { singleLine: true })).toBe('one line only');
    expect(forTerminal('plain text, ünïcödé ✓')).toBe('plain text, ünïcödé ✓');
  });

  it('escapes C1 and bidi controls in JSON without changing its value', () => {
    const value = { m: `x\u009b2J\u202e${OSC52}` };
    const safe = jsonForTerminal(JSON.stringify(value));
    expect(safe).not.toMatch(CONTROL);
    expect(safe).not.toMatch(/\u202e/);
    expect(JSON.parse(safe)).toEqual(value);
  });
});

describe('report to stdout', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ tag: 'sec-term', sim: { learners: 10 }, env: { LOG_LEVEL: 'warn' } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('prints no escape sequence of the service message, as CSV and as NDJSON', async () => {
    const runId = newRunId();
    await h.ctx.store.markQueued([{ org: 'acme', learnerId: 4, runId, source: 'sec.csv', force: false }]);
    await h.ctx.store.recordAttempt('acme', 4, runId, {
      bucket: 'invalid-request',
      code: 'invalid-request',
      status: 400,
      error: `Invalid request${CLEAR}`,
      message: `learner is locked${OSC52}${CLEAR}\u009b2J; ask support`,
      durationMs: 3,
      tokenId: 'abc123',
      countsAsAttempt: true,
    });
    const csv = await runCommand(['report', '--run', runId, '--org', 'acme'], h.env);
    expect(csv.code).toBe(0);
    expect(csv.stdout).not.toMatch(CONTROL);
    expect(csv.stdout).not.toContain(']52;');
    expect(csv.stdout).toContain('"learner is locked; ask support"');
    expect(csv.stdout).toContain(',Invalid request,');

    const nd = await runCommand(['report', '--run', runId, '--org', 'acme', '--format', 'ndjson'], h.env);
    expect(nd.code).toBe(0);
    expect(nd.stdout).not.toMatch(CONTROL);
    // Lossless there: the JSON value is the service's text as it was.
    const row = JSON.parse(nd.stdout.trim()) as { message: string };
    expect(row.message).toBe(`learner is locked${OSC52}${CLEAR}\u009b2J; ask support`);
  });
});
