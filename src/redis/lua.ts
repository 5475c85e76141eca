// The scripts of this folder: the ACL check (acl-check.ts) and the reads of one slot's keys
// (batch.ts).
import { loadScripts } from './scripts.ts';

export const REDIS_SCRIPTS = loadScripts(new URL('./', import.meta.url), ['check-acl', 'read-keys']);
