// Token fragments in texts (logs, outputs, Redis dumps): any 8 characters of a secret in a row is a leak.
import { chmodSync, writeFileSync } from 'node:fs';

export function tokenLeaks(texts: readonly string[], secrets: readonly string[]): string[] {
  const found: string[] = [];
  for (const t of texts)
    for (const s of secrets)
      for (let i = 0; i + 8 <= s.length; i++) {
        if (t.includes(s.slice(i, i + 8))) found.push(`${s.slice(0, 4)} in: ${t.slice(0, 160)}`);
      }
  return found;
}

/** A token file as an operator writes one: readable by its owner only. */
export function writeTokenFile(path: string, text: string): void {
  writeFileSync(path, text);
  chmodSync(path, 0o600);
}
