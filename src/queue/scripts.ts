// The intake's Lua scripts, loaded once for the folder (the one loader refuses a folder listed in parts).
import { loadScripts } from '../redis/scripts.ts';

export const QUEUE_SCRIPTS = loadScripts(new URL('./', import.meta.url), ['set-org-ids', 'take-lanes']);
