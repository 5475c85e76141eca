// The notification settings at the edge: errors name the variable and never show the webhook URL (a
// secret as a whole), the URL stays out of a serialized config and is scrubbed from logs, and the look's
// interval follows the delays.
import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { loadConfig, secretsOf } from '../../src/core/config.ts';
import { createLogger } from '../../src/core/log.ts';
import { maskWebhookUrl } from '../../src/core/webhook-url.ts';
import { runFinished, tokenRefused } from '../../src/ops/notify/events.ts';
import { watchIntervalMs } from '../../src/ops/notify/watch.ts';
import { problemsOf } from '../helpers/config-problems.ts';

const URL_ = 'https://hooks.slack.com/services/T0AAA/B0BBB/Zk3secretKEYxyz';

describe('notification settings', () => {
  it('has the documented defaults, and nothing is sent without a URL', () => {
    const c = loadConfig({});
    expect(c.notifyWebhookUrl).toBeUndefined();
    expect(c.notifyFailureShare).toBe(0.1);
    expect(c.notifyBlockedAfterMs).toBe(30 * 60_000);
    expect(c.notifyStallAfterMs).toBe(30 * 60_000);
  });

  it('reads the URL, keeps it out of JSON and scrubs every form of it from log lines', () => {
    const c = loadConfig({ NOTIFY_WEBHOOK_URL: URL_, NOTIFY_FAILURE_SHARE: '25%', NOTIFY_STALL_AFTER: '0' });
    expect(c.notifyWebhookUrl).toBe(URL_);
    expect(c.notifyFailureShare).toBe(0.25);
    expect(c.notifyStallAfterMs).toBe(0);
    expect(JSON.stringify(c)).not.toContain('Zk3secretKEYxyz');
    let out = '';
    const dest = new Writable({
      write(chunk: Buffer, _e, cb) {
        out += chunk.toString();
        cb();
      },
    });
    const logger = createLogger({
      secrets: secretsOf(c),
      destination: { write: (l: string) => dest.write(l) },
    });
    logger.info({ url: URL_ }, `posting to ${URL_} (path /services/T0AAA/B0BBB/Zk3secretKEYxyz)`);
    expect(out).toContain('posting to');
    expect(out).not.toContain('Zk3secretKEYxyz');
    expect(maskWebhookUrl(URL_)).toBe('https://hooks.slack.com/***');
  });

  it('names the variable and never shows the URL', () => {
    const problems = problemsOf({
      NOTIFY_WEBHOOK_URL: 'ftp://hooks.example/services/SECRETPATH123',
      NOTIFY_FAILURE_SHARE: 'lots',
      NOTIFY_BLOCKED_AFTER: 'soon',
      NOTIFY_STALL_AFTER: '-5m',
    });
    const text = problems.join('\n');
    expect(text).toMatch(/NOTIFY_WEBHOOK_URL: expected an http or https URL/);
    expect(text).not.toContain('SECRETPATH123');
    expect(text).toMatch(/NOTIFY_FAILURE_SHARE: expected a share .* got 'lots'/);
    expect(text).toMatch(/NOTIFY_BLOCKED_AFTER: expected a duration .* got 'soon'/);
    expect(text).toMatch(/NOTIFY_STALL_AFTER: expected a duration/);
    expect(problemsOf({ NOTIFY_WEBHOOK_URL: 'hooks SECRETPATH123' }).join('\n')).not.toContain(
      'SECRETPATH123',
    );
    expect(problemsOf({ NOTIFY_FAILURE_SHARE: '0%' }).join('\n')).toMatch(/NOTIFY_FAILURE_SHARE/);
  });

  it('looks every sixth of the shorter delay, from 250 ms to 30 s, and not at all with both off', () => {
    expect(watchIntervalMs(30 * 60_000, 30 * 60_000)).toBe(30_000);
    expect(watchIntervalMs(60_000, 0)).toBe(10_000);
    expect(watchIntervalMs(1000, 1000)).toBe(250);
    expect(watchIntervalMs(0, 0)).toBe(0);
  });

  it('builds bodies with a plain sentence and ids only', () => {
    const at = new Date('2026-11-26T03:15:02.114Z');
    const refused = tokenRefused('acme', '0123456789ab', at);
    expect(refused.id).toBe('token.refused:acme:0123456789ab');
    expect(refused.body).toMatchObject({
      event: 'token.refused',
      org: 'acme',
      tokenId: '0123456789ab',
      at: at.toISOString(),
    });
    const run = runFinished(
      '20261126T031502-3f9a',
      ['acme', 'beta'],
      { total: 3, transferred: 3 },
      undefined,
      at,
    );
    expect(run.id).toBe('run.finished:20261126T031502-3f9a:3');
    expect(run.body.org).toBeNull();
    expect(run.body.text).toBe(
      'Run 20261126T031502-3f9a for 2 organizations finished: 3 of 3 learners transferred, 0 failed. Nothing to do.',
    );
  });
});
