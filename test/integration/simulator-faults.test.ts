// Fault injection over real sockets: resets before and after the effect, cut bodies, 500s, latency on
// either side of the moment of counting, a service that is down; all seeded and reproducible.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { createSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.ts';
import { waitFor } from '../helpers/wait.ts';

let sim: Simulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function start(options: SimulatorOptions): Promise<Simulator> {
  sim = createSimulator({ learners: 300, ...options });
  await sim.listen();
  return sim;
}

const headers = {
  'user-agent': 'faults-test',
  authorization: 'Bearer sim-acme-1',
  'content-type': 'application/json',
};

/** A transfer whose failure to arrive is an outcome too: 'socket' when the connection died. */
async function transfer(id: number): Promise<{ status: number | 'socket'; body?: unknown; error?: string }> {
  try {
    const res = await request(`${sim?.url}/1/learner/${id}/transfer`, {
      method: 'PATCH',
      headers,
      body: '{}',
    });
    return { status: res.statusCode, body: await res.body.json() };
  } catch (err) {
    return { status: 'socket', error: (err as { code?: string }).code ?? String(err) };
  }
}

describe('simulator: faults', () => {
  it('resets half of the connections before the effect and half after, seeded', async () => {
    await start({ faults: { resetRate: 1 } });
    const ids = Array.from({ length: 20 }, (_, i) => 3 * i + 2); // beta's learners
    for (const id of ids) expect((await transfer(id)).status).toBe('socket');
    const record = sim?.record ?? [];
    expect(record.every((r) => r.status === 'reset' && r.countedAt !== undefined)).toBe(true);
    const before = record.filter((r) => r.fault === 'reset-before');
    const after = record.filter((r) => r.fault === 'reset-after');
    expect(before.length).toBeGreaterThan(0);
    expect(after.length).toBeGreaterThan(0);
    expect(before.length + after.length).toBe(20);
    for (const r of before) {
      expect(r.effectApplied).toBe(false);
      expect(sim?.ownerChanges(r.learnerId ?? 0)).toBe(0);
    }
    for (const r of after) {
      expect(r).toMatchObject({ effectApplied: true, result: 'transferred' });
      expect(sim?.ownerChanges(r.learnerId ?? 0)).toBe(1);
    }

    // The client never heard about the transfers after the effect; retrying finds them done.
    sim?.setFaults({});
    const retried = await transfer(after[0]?.learnerId ?? 0);
    expect(retried.status).toBe(400);
    expect((await transfer(before[0]?.learnerId ?? 0)).status).toBe(200);

    // Same seed, same requests: the same choice of before/after.
    const first = record.slice(0, 20).map((r) => r.fault);
    await sim?.close();
    await start({ faults: { resetRate: 1 } });
    for (const id of ids) await transfer(id);
    expect(sim?.record.map((r) => r.fault)).toEqual(first);
  });

  it('cuts 200 bodies after applying the effect, with the Content-Length of the whole body', async () => {
    await start({ faults: { truncateRate: 1 } });
    const res = await request(`${sim?.url}/1/learner/2/transfer`, { method: 'PATCH', headers, body: '{}' });
    expect(res.statusCode).toBe(200);
    const length = Number(res.headers['content-length']);
    expect(length).toBeGreaterThan(100);
    let received = '';
    const read = (async () => {
      for await (const chunk of res.body) received += String(chunk);
      return JSON.parse(received) as unknown;
    })();
    await expect(read).rejects.toThrow();
    expect(received.length).toBeLessThan(length);
    expect(() => JSON.parse(received)).toThrow(SyntaxError);
    expect(sim?.ownerChanges(2)).toBe(1);
    expect(sim?.record[0]).toMatchObject({
      status: 200,
      result: 'transferred',
      effectApplied: true,
      fault: 'truncate',
    });

    // Only 200s are cut: the repeat's 400 arrives whole.
    expect(await transfer(2)).toMatchObject({ status: 400, body: { error: 'Invalid request' } });
  });

  it('answers 500 "Transfer failed" without effect at errorRate, and a seeded share at 0.5', async () => {
    await start({ faults: { errorRate: 1 } });
    expect(await transfer(2)).toMatchObject({
      status: 500,
      body: { success: false, error: 'Transfer failed', message: expect.any(String) },
    });
    expect(sim?.ownerChanges(2)).toBe(0);
    expect(sim?.record[0]).toMatchObject({ result: 'server-error', fault: 'error', effectApplied: false });

    sim?.setFaults({ errorRate: 0.5 });
    const statuses: Array<number | 'socket'> = [];
    for (let i = 0; i < 40; i++) statuses.push((await transfer(3 * i + 5)).status);
    const failed = statuses.filter((s) => s === 500).length;
    expect(failed).toBeGreaterThan(8);
    expect(failed).toBeLessThan(32);
    expect(statuses.filter((s) => s === 200).length).toBe(40 - failed);
  });

  it('counts after latencyBefore and answers after latencyAfter', async () => {
    await start({ faults: { latencyBeforeMs: [150, 150], latencyAfterMs: [100, 100] } });
    const sent = Date.now();
    expect((await transfer(2)).status).toBe(200);
    const done = Date.now();
    const [r] = sim?.record ?? [];
    expect(r?.countedAt).toBeDefined();
    expect((r?.countedAt ?? 0) - (r?.receivedAt ?? 0)).toBeGreaterThanOrEqual(145);
    expect((r?.respondedAt ?? 0) - (r?.countedAt ?? 0)).toBeGreaterThanOrEqual(95);
    expect(done - sent).toBeGreaterThanOrEqual(245);
  });

  it('when down, destroys every connection at once and counts nothing; back up when cleared', async () => {
    await start({ faults: { down: true } });
    expect((await transfer(2)).status).toBe('socket');
    await expect(request(`${sim?.url}/1/learner`, { headers })).rejects.toMatchObject({
      code: 'UND_ERR_SOCKET',
    });
    expect(sim?.record.map((r) => [r.status, r.result, r.countedAt])).toEqual([
      ['reset', 'down', undefined],
      ['reset', 'down', undefined],
    ]);
    expect(sim?.ownerChanges(2)).toBe(0);
    sim?.setFaults({});
    expect((await transfer(2)).status).toBe(200);
  });

  it('holds transfer answers while asked: the calls stay in flight until released', async () => {
    const s = await start({});
    const release = s.holdAnswers();
    const calls = [transfer(2), transfer(5)];
    await waitFor(
      'both calls received and held',
      () => s.record.filter((r) => r.method === 'PATCH'),
      (rs) => rs.length === 2 && rs.every((r) => r.countedAt !== undefined),
    );
    // Handled (counted, the effect applied), not answered: in flight for as long as the hold lasts.
    await new Promise((resolve) => setImmediate(resolve));
    expect(s.record.map((r) => r.status)).toEqual([0, 0]);
    release();
    expect((await Promise.all(calls)).map((c) => c.status)).toEqual([200, 200]);
    release(); // twice does nothing
    expect((await transfer(8)).status).toBe(200);
  });

  it('rejects fault settings out of range, naming the field', async () => {
    await start({});
    expect(() => sim?.setFaults({ resetRate: 1.5 })).toThrow(/faults.resetRate/);
    expect(() => sim?.setFaults({ latencyAfterMs: [50, 10] })).toThrow(/faults.latencyAfterMs/);
  });
});
