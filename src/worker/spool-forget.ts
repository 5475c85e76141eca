// The spool's side of `audit forget` (docs/personal-data.md): dead processes' spool files rewritten
// without the person, running ones named, and the bodies beside the spool that name them deleted.
import { randomUUID } from 'node:crypto';
import { open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir } from '../core/fsync-dir.ts';
import type { FieldsEraser, SpoolForget } from '../ops/audit/forget.ts';
import { textMentions, type Person } from '../ops/audit/redact.ts';
import { abandonedSpools, takeSpool } from './spool.ts';

/** Kept bodies that name the person: deleted (counted only in a dry run). */
async function forgetBodies(spoolDir: string, person: Person, dryRun: boolean): Promise<number> {
  const dir = join(spoolDir, 'bodies');
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith('.body'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  let n = 0;
  for (const name of names) {
    const path = join(dir, name);
    if (!textMentions(await readFile(path, 'utf8'), person)) continue;
    n++;
    if (!dryRun) await unlink(path);
  }
  if (n > 0 && !dryRun) await fsyncDir(dir);
  return n;
}

/** One spool file's lines with the person's entries erased, and how many changed. */
function eraseSpoolText(text: string, erase: FieldsEraser): { text: string; n: number } {
  let n = 0;
  const lines = text.split('\n').map((line) => {
    let o: { args?: { audit?: Record<string, unknown> } };
    try {
      o = JSON.parse(line) as typeof o;
    } catch {
      return line;
    }
    const audit = o.args?.audit;
    if (!audit || typeof audit.raw !== 'string') return line;
    const fields: Record<string, string> = { raw: audit.raw };
    if (typeof audit.kind === 'string') fields.kind = audit.kind;
    if (typeof audit.reason === 'string') fields.reason = audit.reason;
    const r = erase(fields);
    if (!r) return line;
    n++;
    const next = { ...audit, raw: r.fields.raw, ...(r.fields.reason ? { reason: r.fields.reason } : {}) };
    return JSON.stringify({ ...o, args: { ...o.args, audit: next } });
  });
  return { text: lines.join('\n'), n };
}

/** Spool files of processes that are gone, rewritten beside themselves; those of running ones named. */
async function forgetSpool(
  spoolDir: string,
  prefix: string,
  erase: FieldsEraser,
  dryRun: boolean,
): Promise<SpoolForget['spool']> {
  const out: SpoolForget['spool'] = { entries: 0, files: 0, busy: [] };
  let names: string[];
  try {
    names = (await readdir(spoolDir)).filter((n) => n.startsWith(`${prefix}.`));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return out;
    throw err;
  }
  const gone = new Set(abandonedSpools(spoolDir, prefix));
  for (const name of names.filter((n) => /\.spool(\.replaying\..*)?$/.test(n))) {
    const path = join(spoolDir, name);
    const { n } = eraseSpoolText(await readFile(path, 'utf8').catch(() => ''), erase);
    if (n === 0) continue;
    if (!gone.has(path)) {
      out.busy.push(path);
      continue;
    }
    out.entries += n;
    out.files++;
    if (dryRun) continue;
    // Taken as a replayer takes it (a rename: no replayer reads it meanwhile), then replaced whole.
    const taken = await takeSpool(path);
    if (!taken) continue;
    const { text } = eraseSpoolText(await readFile(taken, 'utf8'), erase);
    const tmp = `${taken}.${randomUUID()}.tmp`;
    const h = await open(tmp, 'wx', 0o600);
    try {
      await h.writeFile(text);
      await h.sync();
    } finally {
      await h.close();
    }
    await rename(tmp, taken);
    await fsyncDir(spoolDir);
  }
  return out;
}

/** Both: the spool files and the kept bodies of one SPOOL_DIR. */
export async function forgetInSpool(
  spoolDir: string,
  prefix: string,
  erase: FieldsEraser,
  person: Person,
  dryRun: boolean,
): Promise<SpoolForget> {
  const spool = await forgetSpool(spoolDir, prefix, erase, dryRun);
  return { spool, bodies: { files: await forgetBodies(spoolDir, person, dryRun) } };
}
