// The limiter's Lua scripts: the .lua files beside this module (includes/policy.lua is the part three of
// them share, includes/clock.lua the one reader of Redis TIME four of them share), read and defined by the
// one loader (redis/scripts.ts: the naming rule and the key counts).
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
