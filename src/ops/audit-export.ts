// audit: the audit stream of every transfer, exported as NDJSON (one transfer a line, oldest first):
// the only record of the authorizations each transfer deleted, for the operator to keep outside Redis.
// A line whose transfer may repeat one whose answer was lost says so (possibleRepeat, with the reason).
import { mkdirSync } from 'node:fs';
import { once } from 'node:events';
import { dirname } from 'node:path';
import type { OutcomeStore } from '../outcomes/store.ts';
import { repeatReason } from '../outcomes/repeat-causes.ts';
import { PrivateOutput } from '../core/private-file.ts';
import { jsonForTerminal } from '../core/terminal-safe.ts';

export interface AuditFilter {
  orgs: readonly string[];
  runId?: string | undefined;
  learnerId?: number | undefined;
}

/**
 * Writes matching audit entries to `out` (mode 0600: names and e-mails; renamed into place when
 * complete, never written through a link) or stdout (C1 and bidi controls escaped, losslessly, so a
 * terminal runs nothing of the service's text). Returns how many it wrote.
 */
export async function exportAudit(
  store: OutcomeStore,
  filter: AuditFilter,
  out?: string,
  stdout: NodeJS.WritableStream = process.stdout,
): Promise<number> {
  let file: PrivateOutput | undefined;
  if (out) {
    mkdirSync(dirname(out), { recursive: true });
    file = new PrivateOutput(out);
  }
  const stream: NodeJS.WritableStream = file?.stream ?? stdout;
  let n = 0;
  try {
    for (const org of filter.orgs) {
      for await (const e of store.audit(org)) {
        if (filter.runId && e.runId !== filter.runId) continue;
        if (filter.learnerId !== undefined && e.learnerId !== filter.learnerId) continue;
        // The stream id starts with the time Redis wrote the entry (ms).
        const at = new Date(Number(e.id.split('-')[0])).toISOString();
        const json = `${JSON.stringify({
          org,
          learnerId: e.learnerId,
          runId: e.runId,
          transferId: e.transferId || null,
          recordedAt: at,
          auditId: e.id,
          kind: e.kind,
          // A file read alone must say which transfers' revoked authorizations are unknown, and why.
          ...(e.possibleRepeat
            ? { possibleRepeat: true, possibleRepeatReason: repeatReason(e.repeatCauses ?? []) }
            : {}),
          result: e.result,
        })}\n`;
        const line = out ? json : jsonForTerminal(json);
        n++;
        if (!stream.write(line)) await once(stream, 'drain');
      }
    }
  } catch (err) {
    // A failed export leaves no partial file (and an earlier export at that path as it was).
    await file?.abort();
    throw err;
  }
  await file?.commit();
  return n;
}
