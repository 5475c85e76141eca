// The CLI is thin: parse flags, load config, call a function that tests can call too.
import { Command, CommanderError } from 'commander';
import { commands } from './commands.ts';
import { ERRORS } from '../core/errors.ts';
import { reportCliError } from './shared.ts';

const program = new Command('learner-transfer')
  .description('Move learners between organizations through the rate-limited Learner API, exactly to budget.')
  .version('0.1.0')
  .showHelpAfterError('(run with --help for usage)')
  .exitOverride();

for (const register of commands) register(program);

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

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Help and version exit 0; a bad flag is a usage error, with commander's message already printed.
    process.exitCode = err.exitCode === 0 ? 0 : ERRORS.LT_USAGE.exit;
  } else {
    process.exitCode = reportCliError(err);
    // The error is said: a connection a library still holds open must not keep the command alive.
    setTimeout(() => process.exit(), 3000).unref();
  }
}
