// Reads of many organizations in one round trip per Redis node, not one per organization. An
// item's reads share its {hash tag}'s slot; items are grouped by the node serving it, and
// nothing crosses a slot.
import calculateSlot from 'cluster-key-slot';
import type { ChainableCommander } from 'ioredis';
import { isCluster, type RedisClient } from './client.ts';
import { REDIS_SCRIPTS } from './lua.ts';

export interface BatchRead<T> {
  /** A key of the item: every command it adds is in this key's slot. */
  slotKey: string;
  /** Adds the item's commands to the pipeline. */
  add(pipe: ChainableCommander): void;
  /** The item's value from its replies (in the order it added them). */
  read(replies: readonly unknown[]): T;
}

export type KeyRead = 'hgetall' | 'llen' | 'zcard';

/**
 * Adds one read-keys.lua call: every read of one item in one command; its reply, one entry a
 * read.
 */
export function addReads(pipe: ChainableCommander, reads: readonly (readonly [string, KeyRead])[]): void {
  if (reads.length === 0) return;
  REDIS_SCRIPTS.queue(
    pipe,
    'read-keys',
    reads.map(([key]) => key),
    reads.map(([, how]) => how),
  );
}

/** A hash from HGETALL's flat list (read-keys.lua answers it so). */
export function hashOf(flat: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!Array.isArray(flat)) return out;
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = String(flat[i + 1]);
  return out;
}

/** Items per pipeline at most: one huge reply held in memory at once helps nobody. */
const CHUNK_ITEMS = 2_000;

function nodeGroup(redis: RedisClient, key: string): string {
  // The slot map as ioredis routes by it; unknown while the cluster is not ready (then item by
  // item).
  return isCluster(redis) ? (redis.slots[calculateSlot(key)]?.join(',') ?? '') : '';
}

async function runPipeline<T>(redis: RedisClient, items: readonly BatchRead<T>[]): Promise<T[]> {
  const pipe = redis.pipeline();
  const spans: number[] = [];
  for (const item of items) {
    const before = pipe.length;
    item.add(pipe);
    spans.push(pipe.length - before);
  }
  const replies = (await pipe.exec()) ?? [];
  let at = 0;
  return items.map((item, i) => {
    const n = spans[i] ?? 0;
    const mine = replies.slice(at, at + n);
    at += n;
    const values = mine.map(([err, value]) => {
      if (err) throw err;
      return value;
    });
    return item.read(values);
  });
}

/**
 * The items' values, in order, from one pipeline per node (and per CHUNK_ITEMS). A Cluster
 * whose slots moved refuses a node's pipeline: its items are then read one pipeline each.
 */
export async function readBatched<T>(redis: RedisClient, items: readonly BatchRead<T>[]): Promise<T[]> {
  // A pipeline takes the commands its client had when it was made.
  REDIS_SCRIPTS.define(redis);
  const groups = new Map<string, number[]>();
  items.forEach((item, i) => {
    const group = nodeGroup(redis, item.slotKey);
    const list = groups.get(group);
    if (list) list.push(i);
    else groups.set(group, [i]);
  });
  const out = new Array<T>(items.length);
  await Promise.all(
    [...groups.values()].map(async (indexes) => {
      const chunks: number[][] = [];
      for (let at = 0; at < indexes.length; at += CHUNK_ITEMS)
        chunks.push(indexes.slice(at, at + CHUNK_ITEMS));
      await Promise.all(
        chunks.map(async (chunk) => {
          const mine = chunk.map((i) => items[i] as BatchRead<T>);
          let values: T[];
          try {
            values = await runPipeline(redis, mine);
          } catch (err) {
            if (!isCluster(redis) || !/slots allocation group/.test((err as Error).message)) throw err;
            values = await Promise.all(mine.map(async (item) => (await runPipeline(redis, [item]))[0] as T));
          }
          chunk.forEach((i, k) => (out[i] = values[k] as T));
        }),
      );
    }),
  );
  return out;
}
