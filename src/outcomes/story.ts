// A finished learner's story (its history and audit ids), read back from the audit stream or the archive
// for the learner page: a final record keeps it in an entry of kind 'record' (docs/redis-memory.md).
import type { RedisClient } from '../redis/client.ts';
import { recordSchema, type AttemptEntry, type OutcomeRecord } from './record.ts';

export interface RecordStory {
  /** The record's bucket when the entry was written. */
  bucket: string;
  history: AttemptEntry[];
  auditIds: string[];
  /** The story entry written before this one (the record was compacted again later). */
  prev: string | undefined;
}

/** Reads a story entry the archive trimmed from the stream (undefined: not found there either). */
export type StoryReader = (entryId: string) => Promise<RecordStory | undefined>;

/** At most this many entries of one record are followed (each late attempt or retry adds one). */
const MAX_CHAIN = 20;

const historySchema = recordSchema.shape.h;
const idsSchema = recordSchema.shape.au;

function parseJson(text: string | undefined): unknown {
  try {
    return JSON.parse(text ?? '[]') as unknown;
  } catch {
    return [];
  }
}

/** The story of an audit entry of kind 'record', from its fields. */
export function recordStoryOf(f: Record<string, string>): RecordStory {
  return {
    bucket: f.bucket ?? '',
    history: historySchema.safeParse(parseJson(f.history)).data ?? [],
    auditIds: idsSchema.safeParse(parseJson(f.auditIds)).data ?? [],
    prev: f.prev || undefined,
  };
}

/**
 * The record with its story put back (h, au), each entry from the stream or else `fromArchive`.
 * `archived`: an entry could be read from neither.
 */
export async function withStory(
  redis: RedisClient,
  auditKey: string,
  record: OutcomeRecord,
  fromArchive?: StoryReader,
): Promise<{ record: OutcomeRecord; archived: boolean }> {
  const stories: RecordStory[] = [];
  let id = record.f;
  let archived = false;
  for (let hop = 0; id && hop < MAX_CHAIN; hop++) {
    const [entry] = await redis.xrange(auditKey, id, id);
    let story: RecordStory | undefined;
    if (entry) {
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < entry[1].length; i += 2) f[entry[1][i] as string] = entry[1][i + 1] as string;
      story = recordStoryOf(f);
    } else {
      // Trimmed from the stream: the archive files keep it.
      story = await fromArchive?.(id);
    }
    if (!story) {
      archived = true;
      break;
    }
    stories.unshift(story);
    id = story.prev;
  }
  if (!record.f) return { record, archived };
  const h = [...stories.flatMap((s) => s.history), ...(record.h ?? [])];
  const au = [...stories.flatMap((s) => s.auditIds), ...(record.au ?? [])];
  return { record: { ...record, h, au }, archived };
}
