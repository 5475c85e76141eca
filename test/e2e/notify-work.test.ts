// Two real `work` processes with NOTIFY_WEBHOOK_URL against one Redis, the simulator and a real HTTP
// receiver: the end of a run, its failures above the share and a refused token are each POSTed once,
// whichever process records the last outcome, before the processes exit; no body holds a token, and the
// webhook URL is in neither process's output.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli, waitExit } from '../helpers/cli.ts';
import { learnersNotIn, startHarness, type Harness } from '../helpers/pipeline.ts';
import { tokenLeaks } from '../helpers/token-leaks.ts';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.ts';

let rx: Receiver;
let h: Harness;
const SECRETS = ['sim-acme-1', 'sim-acme-2', 'sim-beta-1'];

beforeAll(async () => {
  rx = await startReceiver();
  h = await startHarness({
    tag: 'notify-work',
    sim: { learners: 200 },
    env: {
      LEARNER_API_TOKENS: 'acme:sim-acme-1,acme:sim-acme-2,beta:sim-beta-1',
      NOTIFY_WEBHOOK_URL: rx.url,
      NOTIFY_FAILURE_SHARE: '1%',
    },
  });
});
afterAll(async () => {
  await h?.close();
  await rx?.close();
});

/** Two `work --until-idle` processes, side by side, to their exit. */
async function twoWorkers(args: string[] = []) {
  const a = spawnCli(['work', '--until-idle', ...args], h.env);
  const b = spawnCli(['work', '--until-idle', ...args], h.env);
  return Promise.all([waitExit(a, 90_000), waitExit(b, 90_000)]);
}

function clean(outputs: string[]): void {
  const secret = rx.secretPath.split('/').pop() as string;
  expect(outputs.filter((o) => o.includes(secret))).toEqual([]);
  expect(tokenLeaks(outputs, SECRETS)).toEqual([]);
}

describe('work with NOTIFY_WEBHOOK_URL', () => {
  it('says the end of a run and its failures once, with two work processes', async () => {
    const { runId } = await h.enqueueIds([...learnersNotIn('acme', 29), 999_999]);
    const [a, b] = await twoWorkers();
    // A learner failed (999999 does not exist): a process that served the run exits 1 (one started late,
    // on a busy machine, may find nothing waiting and exit 0).
    expect([a.code, b.code]).toContain(1);
    expect([0, 1]).toEqual(expect.arrayContaining([a.code, b.code]));

    const finished = rx.of('run.finished');
    expect(finished).toHaveLength(1);
    expect(finished[0]?.body).toMatchObject({
      event: 'run.finished',
      org: 'acme',
      run: runId,
      counts: { done: 29, failed: 1, waiting: 0, total: 30, buckets: { transferred: 29, 'not-found': 1 } },
      report: null,
    });
    expect(String(finished[0]?.body.text)).toContain(`Run ${runId} for acme finished: 29 of 30`);
    const failures = rx.of('run.failures');
    expect(failures).toHaveLength(1);
    expect(failures[0]?.body).toMatchObject({ run: runId, threshold: 0.01, counts: { failed: 1 } });
    // One of the two claimed each event; the log says which, with the webhook masked.
    const sentLines = `${a.stderr}${b.stderr}`.split('\n').filter((l) => l.includes('"notification sent"'));
    expect(sentLines).toHaveLength(2);
    expect(`${a.stderr}${b.stderr}`).toContain(`${new URL(rx.url).host}/***`);
    clean([a.stderr, b.stderr, a.stdout, b.stdout, ...rx.received.map((r) => r.raw)]);
  });

  it('says a token refused (401) once, by its id', async () => {
    h.sim.revokeToken('sim-beta-1');
    await h.enqueueIds(learnersNotIn('beta', 4, 100), 'beta');
    const [a, b] = await twoWorkers(['--org', 'beta']);
    expect(a.stderr + b.stderr).toMatch(/every token refused \(401\) for: beta/);
    const refused = rx.of('token.refused');
    expect(refused).toHaveLength(1);
    const id = h.config.tokens.find((t) => t.org === 'beta')?.id;
    expect(refused[0]?.body).toMatchObject({ event: 'token.refused', org: 'beta', tokenId: id, run: null });
    clean([a.stderr, b.stderr, ...rx.received.map((r) => r.raw)]);
  });
});
