// The error budget's settings at the edge: HALT_AT, HALT_SAMPLE and HALT_STORM read once, with errors that name the
// variable and the bad value; the flags of `limits set` follow the same rule (core/halt-rule.ts).
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/core/config.ts';
import { parseHaltAt, parseHaltSample } from '../../src/core/halt-rule.ts';
import { orgHalted } from '../../src/ops/notify/events.ts';
import { problemsOf } from '../helpers/config-problems.ts';

describe('HALT_AT and HALT_SAMPLE', () => {
  it('default to 50% of the last 20, and read a share, a ratio or off', () => {
    const c = loadConfig({});
    expect([c.haltAt, c.haltSample]).toEqual([50, 20]);
    expect(loadConfig({ HALT_AT: '80%', HALT_SAMPLE: '50' })).toMatchObject({ haltAt: 80, haltSample: 50 });
    expect(loadConfig({ HALT_AT: '0.25' }).haltAt).toBe(25);
    expect(loadConfig({ HALT_AT: 'off' }).haltAt).toBe('off');
  });

  it('name the variable and the bad value', () => {
    const text = problemsOf({ HALT_AT: 'half', HALT_SAMPLE: '1' }).join('\n');
    expect(text).toMatch(/HALT_AT: expected a share of the sample like 50% .* got 'half'/);
    expect(text).toMatch(/HALT_SAMPLE: expected a whole number of outcomes from 2 to 1000, got '1'/);
    expect(problemsOf({ HALT_AT: '0%' }).join('\n')).toMatch(/HALT_AT/);
    expect(problemsOf({ HALT_SAMPLE: '20.5' }).join('\n')).toMatch(/HALT_SAMPLE/);
  });

  it('one rule for the variables and the flags', () => {
    expect(['50%', '100%', '1%', 'OFF', '7'].map(parseHaltAt)).toEqual([50, 100, 1, 'off', 7]);
    expect(['101%', '0', '', 'fifty'].map(parseHaltAt)).toEqual([undefined, undefined, undefined, undefined]);
    expect(['2', '1000', '1', '1001', '-3'].map(parseHaltSample)).toEqual([
      2,
      1000,
      undefined,
      undefined,
      undefined,
    ]);
  });
});

describe('HALT_STORM', () => {
  it('defaults to 30 minutes, reads a duration or off, and names a bad value', () => {
    expect(loadConfig({}).haltStormMs).toBe(30 * 60_000);
    expect(loadConfig({ HALT_STORM: '2h' }).haltStormMs).toBe(2 * 3_600_000);
    expect(loadConfig({ HALT_STORM: 'off' }).haltStormMs).toBe(0);
    expect(loadConfig({ HALT_STORM: '0' }).haltStormMs).toBe(0);
    expect(problemsOf({ HALT_STORM: 'soon' }).join('\n')).toMatch(
      /HALT_STORM: expected a duration like 30m .* or off, got 'soon'/,
    );
  });
});

describe('org.halted', () => {
  it('says the reason and what to do, once per halt', () => {
    const at = new Date('2026-11-28T09:00:00Z');
    const e = orgHalted('acme', null, '18 of the last 20 calls answered 403 forbidden', at);
    expect(e.body).toMatchObject({
      event: 'org.halted',
      org: 'acme',
      reason: '18 of the last 20 calls answered 403 forbidden',
    });
    expect(e.body.text).toContain("'learner-transfer plan --check'");
    expect(e.body.text).toContain("'learner-transfer resume --org acme'");
    expect(e.id).toBe(`org.halted:acme::${at.getTime()}`);
    const t = orgHalted('acme', 'abc123', '10 of the last 10 calls answered 403 forbidden', at);
    expect(t.body.tokenId).toBe('abc123');
    expect(t.body.text).toContain('--token abc123');
  });

  it('sends a storm that does not end to the service, not to plan --check', () => {
    const reason =
      'a 5xx storm that does not end: the service answered only server errors (5xx) for 30 min, 61 probes in a row';
    const e = orgHalted('acme', null, reason, new Date());
    expect(e.body.text).toContain('Check that the service answers again');
    expect(e.body.text).not.toContain('plan --check');
    expect(e.body.text).toContain("'learner-transfer resume --org acme'");
  });
});
