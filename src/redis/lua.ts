// The scripts of this folder (the one loader takes a folder's scripts together): the ACL check at start
// (acl-check.ts) and the reads of several keys of one slot in one call (batch.ts).
import { loadScripts } from './scripts.ts';

export const REDIS_SCRIPTS = loadScripts(new URL('./', import.meta.url), ['check-acl', 'read-keys']);
