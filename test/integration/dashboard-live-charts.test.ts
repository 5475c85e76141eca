// The live stream keeps a page's burn-down charts current whenever its stream (re)connects. A stream's
// later frames carry only what changed since its own first frame, so a chart that changed before that
// first frame (after the page was drawn, or while a dropped stream was down) must come in the first
// frame itself: otherwise the page shows the new numbers beside the old chart until the organization
// changes again. Over the real route and socket, with a reader that keeps charts as the page script does
// (public/app.js swaps in each chart a frame carries).
import type { FastifyInstance } from 'fastify';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newRunId } from '../../src/outcomes/runs.ts';
import { buildDashboard } from '../../src/dashboard/server.ts';
import { authed, bearer, DASHBOARD_TOKEN } from '../helpers/dashboard.ts';
import { startHarness, type Harness } from '../helpers/pipeline.ts';
import { sseFrames } from '../helpers/sse.ts';
import { waitFor } from '../helpers/wait.ts';

let h: Harness;
let app: FastifyInstance;
let base: string;
let runId: string;
let nextLearner = 100;

beforeAll(async () => {
  h = await startHarness({ tag: 'livechart', env: { DASHBOARD_TOKEN } });
  runId = newRunId();
  await h.ctx.runs.create({ id: runId, kind: 'csv', source: 'cohort.csv', orgs: ['acme'] });
  await addLearner();
  app = await buildDashboard(h.ctx, { liveIntervalMs: 200, bullBoard: false });
  base = (await app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
});
afterAll(async () => {
  await app?.close();
  await h?.close();
});

/** One more learner queued for acme (no worker runs): acme has one more left. */
async function addLearner(): Promise<void> {
  nextLearner += 1;
  await h.ctx.producer.add([{ org: 'acme', learnerId: nextLearner, source: 'cohort.csv' }], runId);
}

const leftOf = (svg: string): number => Number(/data-left="(\d+)"/.exec(svg)?.[1] ?? NaN);

interface Frame {
  full: boolean;
  orgs: { org: string; burnDown: { left: number } }[];
  charts: Record<string, string>;
}

/** A /api/live stream, its frames kept in order as they arrive. */
async function openStream(): Promise<{ frames: Frame[]; close(): Promise<void> }> {
  const ac = new AbortController();
  const res = await request(`${base}/api/live`, { headers: bearer, signal: ac.signal });
  expect(res.statusCode).toBe(200);
  const frames: Frame[] = [];
  const reading = (async () => {
    for await (const f of sseFrames(res.body))
      if (f.event === 'overview' && f.data) frames.push(JSON.parse(f.data) as Frame);
  })().catch(() => undefined);
  return {
    frames,
    async close() {
      ac.abort();
      await reading;
    },
  };
}

/**
 * Applies the stream's frames to `charts` (key -> data-left) as the page does, until a frame says acme
 * has `left` learners left; returns what acme's chart then shows.
 */
async function chartWhenSeen(
  stream: { frames: Frame[] },
  charts: Map<string, number>,
  left: number,
): Promise<number | undefined> {
  let applied = 0;
  const seen = await waitFor(
    `a frame with acme at ${left} left`,
    () => {
      for (; applied < stream.frames.length; applied++) {
        const frame = stream.frames[applied] as Frame;
        for (const [key, svg] of Object.entries(frame.charts)) charts.set(key, leftOf(svg));
        if (frame.orgs.some((o) => o.org === 'acme' && o.burnDown.left === left)) return true;
      }
      return false;
    },
    (found) => found,
  );
  expect(seen).toBe(true);
  return charts.get('org:acme');
}

describe('the live stream and the burn-down charts', () => {
  it('a (re)connected stream brings the charts that changed before its first frame, then what changes', async () => {
    // The page as drawn: its charts.
    const page = (await authed(app, { url: '/' })).body;
    const drawn = /data-burn-down="org:acme"[\s\S]*?<svg[^>]*data-left="(\d+)"/.exec(page)?.[1];
    const charts = new Map([['org:acme', Number(drawn)]]);
    expect(charts.get('org:acme')).toBe(1);

    // acme changes after the page was drawn, before its stream sends anything.
    await addLearner();
    const first = await openStream();
    try {
      expect(await chartWhenSeen(first, charts, 2)).toBe(2);
      // The first frame of a stream is whole: every organization's and run's chart is in it.
      expect(first.frames[0]).toMatchObject({ full: true });
      expect(Object.keys(first.frames[0]?.charts ?? {}).sort()).toEqual(['org:acme', `run:${runId}`]);
    } finally {
      await first.close();
    }

    // The stream drops; acme changes while it is down; the browser reconnects.
    await addLearner();
    const again = await openStream();
    try {
      expect(await chartWhenSeen(again, charts, 3)).toBe(3);
      expect(Object.keys(again.frames[0]?.charts ?? {})).toContain('org:acme');
      // And on a connected stream, a change brings the chart anew (a frame of what changed).
      await addLearner();
      expect(await chartWhenSeen(again, charts, 4)).toBe(4);
    } finally {
      await again.close();
    }
  });
});
