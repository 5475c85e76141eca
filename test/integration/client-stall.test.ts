// The client's request timeout against a process that stalls: the simulator runs in a child process and
// answers while this test's main thread is blocked (Atomics.wait: timers come due and the answer waits in
// the socket, as after a VM pause or SIGSTOP). An answer that arrived is read, whole or cut, before any
// timeout decides; a stall is reported once, however many calls saw it; the stalled time is not counted
// against the service, within the call's hard bound; a slow service still times out as before.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LearnerApiClient } from '../../src/api/client.ts';
import { STALL_MS } from '../../src/api/deadline.ts';
import { spawnCli } from '../helpers/cli.ts';
import { waitFor } from '../helpers/wait.ts';

const TOKEN = 'sim-acme-1';
type Sim = ReturnType<typeof spawnCli>;
const sims: Sim[] = [];

/** The simulator CLI in its own process (it answers while this one is blocked); resolves its URL. */
async function startSim(args: string[]): Promise<string> {
  const child = spawnCli(['simulate', '--port', '0', '--learners', '300', ...args], {});
  sims.push(child);
  const url = await waitFor(
    "the simulator's address on its stdout (or its exit)",
    () => /listening on (http:\/\/[\d.:]+)/.exec(child.output.stdout)?.[1],
    (found) => found !== undefined || child.exitCode !== null,
    // A CLI loads the whole program: on a busy two-core machine, three at once take well over 30 s.
    {
      timeoutMs: 110_000,
      show: () => `stdout ${child.output.stdout}; stderr ${child.output.stderr.slice(-2000)}`,
    },
  );
  if (url === undefined) throw new Error(`simulator exited: ${child.output.stderr.slice(-2000)}`);
  return url;
}

/**
 * Blocks this thread for `ms`, starting `after` ms from now: the process stalls with calls in flight. The
 * block runs in the loop's check phase (setImmediate), so on waking the loop runs its due timers before
 * it polls the sockets, as a process woken from SIGSTOP does (its poll returns early, then timers run).
 */
function stallAfter(after: number, ms: number): Promise<void> {
  return new Promise((resolve) =>
    setTimeout(
      () =>
        setImmediate(() => {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
          resolve();
        }),
      after,
    ),
  );
}

let fast: string; // answers in 300 ms
let slow: string; // answers in 2.4 s
let cut: string; // answers in 300 ms with every 200 body cut in half
const clients: LearnerApiClient[] = [];
const at = (url: string, requestTimeoutMs: number, stalls: number[] = []) => {
  const c = new LearnerApiClient({
    baseUrl: url,
    userAgent: 'lt-test',
    requestTimeoutMs,
    connectTimeoutMs: 1000,
    onStall: (ms) => stalls.push(ms),
  });
  clients.push(c);
  return c;
};

beforeAll(async () => {
  [fast, slow, cut] = await Promise.all([
    startSim(['--latency', '300-300', '--repeat-mode', 'error']),
    startSim(['--latency', '2400-2400', '--repeat-mode', 'error']),
    startSim(['--latency', '300-300', '--repeat-mode', 'error', '--truncate-rate', '1']),
  ]);
}, 120_000);

afterAll(async () => {
  for (const c of clients) await c.close();
  for (const s of sims) s.kill('SIGTERM');
});

describe('a stalled process reads the answers that arrived', () => {
  it('a stall past the timeout: every call in flight gets its answer, and the stall is reported once', async () => {
    const stalls: number[] = [];
    const c = at(fast, 500, stalls);
    // Learners 2, 3, 5 are outside acme: three transfers in flight, answered 300 ms in, read 2 s later.
    const calls = [2, 3, 5].map((id) => c.transferLearner(id, TOKEN));
    await stallAfter(50, 2000);
    const outcomes = await Promise.all(calls);
    expect(outcomes.map((o) => o.code)).toEqual(['transferred', 'transferred', 'transferred']);
    for (const o of outcomes) {
      if (o.code !== 'transferred') continue;
      expect((o as { raw?: string }).raw).toContain(`"learnerId":${o.result.data.learnerId}`);
    }
    expect(stalls).toHaveLength(1);
    // The timers were due at 500 ms and ran at about 2050 ms.
    expect(stalls[0]).toBeGreaterThanOrEqual(STALL_MS);
    expect(stalls[0]).toBeLessThan(2100);
  });

  it('a pause too short to be a stall: the timeout still reads the socket first (one poll turn)', async () => {
    const stalls: number[] = [];
    const c = at(fast, 500, stalls);
    const call = c.transferLearner(6, TOKEN);
    // Blocked from 50 to 850 ms: the timer fires 350 ms late, the answer (at 300 ms) waits in the socket.
    await stallAfter(50, 800);
    const o = await call;
    expect(o.code).toBe('transferred');
    expect(stalls).toEqual([]);
  });

  it('a cut body that arrived during the stall is kept as far as it came', async () => {
    const c = at(cut, 500);
    const call = c.transferLearner(8, TOKEN);
    await stallAfter(50, 2000);
    const o = await call;
    expect(o.code).toBe('bad-response');
    if (o.code !== 'bad-response') return;
    expect(o.status).toBe(200);
    // The service closed the connection half way: the error is the cut, not our timeout.
    expect(o.message).toMatch(/response cut while reading the body/);
    expect(o.message).not.toMatch(/timeout/i);
    expect(o.body?.length).toBeGreaterThan(20);
    expect(o.body?.startsWith('{"success":true')).toBe(true);
  });

  it("the stalled time is not the service's: a call whose answer comes after the wake gets its timeout again", async () => {
    const stalls: number[] = [];
    const c = at(slow, 1000, stalls);
    // Blocked from 50 to 2050 ms; the answer comes at 2400 ms, within a second of the wake.
    const call = c.transferLearner(9, TOKEN, { hardMs: 6000 });
    await stallAfter(50, 2000);
    const o = await call;
    expect(o.code).toBe('transferred');
    expect(stalls).toHaveLength(1);
  });

  it('never past the hard bound: with no answer by then, the call ends as a timeout that names the stall', async () => {
    const c = at(slow, 1000);
    // Blocked from 50 to 2150 ms, past the hard bound (1200 ms): no fresh timeout, though one (to 3150 ms)
    // would have seen the answer at 2400 ms.
    const call = c.transferLearner(11, TOKEN, { hardMs: 1200 });
    await stallAfter(50, 2100);
    const o = await call;
    expect(o.code).toBe('network-error');
    if (o.code !== 'network-error') return;
    expect(o.errorCode).toBe('ABORT_ERR');
    expect(o.maybeDelivered).toBe(true);
    expect(o.message).toMatch(/after the process woke from a stall of \d+\.\d s/);
  });

  it('a stall before the first byte is written, past the time to send: the call is not sent at all', async () => {
    const c = at(fast, 2000);
    // A new client opens its connection first: the process freezes before it can write the request.
    const call = c.transferLearner(14, TOKEN, { hardMs: 3000, sendWithinMs: 200 });
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 600);
    const o = await call;
    expect(o.code).toBe('network-error');
    if (o.code !== 'network-error') return;
    expect(o.errorCode).toBe('LT_NOT_SENT');
    expect(o.maybeDelivered).toBe(false);
    expect(o.message).toMatch(/^not sent: its first byte would have gone out \d+ ms after/);
    // The service never saw it: learner 14 (outside acme) is still to move, so the next call, in time,
    // transfers it (the repeat of a call that had arrived would be refused: the simulator's repeat mode).
    const again = await c.transferLearner(14, TOKEN, { hardMs: 3000, sendWithinMs: 1000 });
    expect(again.code).toBe('transferred');
  });

  it('a call whose time to send ran out before it started is not sent either', async () => {
    const c = at(fast, 2000);
    const o = await c.transferLearner(15, TOKEN, { hardMs: 100, sendWithinMs: -150 });
    expect(o.code === 'network-error' && o.errorCode === 'LT_NOT_SENT' && !o.maybeDelivered).toBe(true);
    // Learner 15 (outside acme) was never called: in time, it transfers.
    expect((await c.transferLearner(15, TOKEN, { sendWithinMs: 1000 })).code).toBe('transferred');
  });

  it('a hard bound shorter than the timeout: the call is not sent, rather than cut on the wire at the bound', async () => {
    // Once written, a call is waited for its whole timeout (an abort then would throw away the answer of
    // a call the service may have done): with 600 ms left of its 2000 ms, it does not leave at all.
    const c = at(slow, 2000);
    const o = await c.transferLearner(17, TOKEN, { hardMs: 600 });
    expect(o.code === 'network-error' && o.errorCode === 'LT_NOT_SENT' && !o.maybeDelivered).toBe(true);
    // Learner 17 (outside acme) was never called: with the time for a whole timeout, it transfers.
    expect((await at(slow, 3000).transferLearner(17, TOKEN)).code).toBe('transferred');
  });

  it('without a stall, a slow service times out at REQUEST_TIMEOUT as before', async () => {
    const stalls: number[] = [];
    const c = at(slow, 500, stalls);
    const started = performance.now();
    const o = await c.transferLearner(12, TOKEN);
    const took = performance.now() - started;
    expect(o.code).toBe('network-error');
    if (o.code !== 'network-error') return;
    expect(o.errorCode).toBe('ABORT_ERR');
    expect(o.message).toMatch(/aborted due to timeout \(500 ms\)$/);
    // Not before its time; and before the answer (at 2400 ms), or it would have been read.
    expect(took).toBeGreaterThanOrEqual(490);
    expect(stalls).toEqual([]);
  });
});
