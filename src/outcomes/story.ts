// A finished learner's story (its attempt history and the ids of its audit entries) lives in the audit
// stream, not in its record: finish-attempt.lua compacts a final record and writes the story as an entry
// of kind 'record' (docs/redis-memory.md). Here it is read back for the dashboard's learner page; once the
// archive has trimmed the stream, the story is in the archive files and the record says so.
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
 * The record with its whole story put back (h, au): from its story entries, oldest first, then what it
 * gathered since. `archived` is true when an entry is no longer in the stream (the archive trimmed it).
 */
export async function withStory(
  redis: RedisClient,
  auditKey: string,
  record: OutcomeRecord,
): Promise<{ record: OutcomeRecord; archived: boolean }> {
  const stories: RecordStory[] = [];
  let id = record.f;
  let archived = false;
  for (let hop = 0; id && hop < MAX_CHAIN; hop++) {
    const [entry] = await redis.xrange(auditKey, id, id);
    if (!entry) {
      archived = true;
      break;
    }
    const f: Record<string, string> = {};
    for (let i = 0; i + 1 < entry[1].length; i += 2) f[entry[1][i] as string] = entry[1][i + 1] as string;
    const story = recordStoryOf(f);
    stories.unshift(story);
    id = story.prev;
  }
  if (!record.f) return { record, archived };
  const h = [...stories.flatMap((s) => s.history), ...(record.h ?? [])];
  const au = [...stories.flatMap((s) => s.auditIds), ...(record.au ?? [])];
  return { record: { ...record, h, au }, archived };
}
