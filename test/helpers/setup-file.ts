// Runs in every test file (vitest `setupFiles`): after the file's own hooks, no CLI child it started is
// left running, whether its tests passed, failed or timed out.
import { afterAll } from 'vitest';
import { killLiveChildren } from './children.ts';

afterAll(() => {
  killLiveChildren();
});
