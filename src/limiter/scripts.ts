// The limiter's Lua scripts, beside this module, read and defined by the one loader
// (redis/scripts.ts).
import { loadScripts } from '../redis/scripts.ts';

export const LIMITER_SCRIPTS = loadScripts(new URL('./', import.meta.url), [
  'acquire',
  'block',
  'change-policy',
  'judge-outcome',
  'learn',
  'peek',
  'peek-frees',
  'refresh-open',
  'release',
  'settle',
]);
