// The binary's entry: run() with this process's arguments, environment and streams, and what only a
// real process needs (signals, a forced exit, the console of ioredis).
import { run } from './run.ts';
import { processHooks } from './signals.ts';

// ioredis prints a console warning when the ACL user may not run INFO (its ready check). The check at start
// says it in one sentence, with the rule to grant (exit 7): its line would only come first and confuse.
const consoleWarn = console.warn.bind(console);
console.warn = (...args: unknown[]) => {
  if (
    typeof args[0] === 'string' &&
    args[0].startsWith('Skipping the ready check because INFO command fails')
  )
    return;
  consoleWarn(...args);
};

// A closed pipe (`report | head -1`) is the run's to handle (io.ts: quietly, exit 0); one that errors after
// the run is over has nothing left to stop, and must not end in a stack trace.
process.stdout.on('error', () => {});
process.stderr.on('error', () => {});

// No top-level await: the build runs this file as CommonJS (scripts/compile.mjs). Should the
// process come to its end with the run unsettled, it exits 13, as an unsettled top-level await did.
process.exitCode = 13;
void run(process.argv.slice(2), {
  env: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  process: processHooks,
}).then((status) => {
  process.exitCode = status;
});
