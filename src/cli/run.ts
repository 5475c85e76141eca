// The CLI as a function: the binary (main.ts), programs and tests all call run(), which runs one
// command with the environment and streams given and returns the exit status; it never exits the
// process and leaves nothing behind. It imports the command table alone (commands.ts).
import { CommanderError, type Command } from 'commander';
import { ERRORS } from '../core/errors.ts';
import { commands } from './commands.ts';
import { Cli, type CliIo, type Output } from './io.ts';
import { PlainCommand } from './program.ts';
import { addEnvironmentHelp } from './help-env.ts';

export type { CliIo } from './io.ts';

/** A terminal's width; elsewhere commander's own 80. */
function widthOf(stream: Output): number {
  return (stream.isTTY ? (stream as { columns?: number }).columns : undefined) ?? 80;
}

/** The program of one run, its output going to the run's streams. */
export function buildProgram(cli: Cli): Command {
  const program = new PlainCommand('learner-transfer')
    .description(
      'Move learners between organizations through the rate-limited Learner API, exactly to budget.',
    )
    .version('0.1.0')
    .configureOutput({
      writeOut: (text) => void cli.stdout.write(text),
      writeErr: (text) => void cli.stderr.write(text),
      // Help wraps at the width of the run's own terminal, if it writes to one.
      getOutHelpWidth: () => widthOf(cli.stdout),
      getErrHelpWidth: () => widthOf(cli.stderr),
    })
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  // Subcommands copy their parent's output and exit settings when made: set those first.
  for (const register of commands) register(program, cli);
  addEnvironmentHelp(program);
  return program;
}

/** Runs the command `argv` names (without node and the script) and returns its exit status. */
export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const cli = new Cli(io);
  try {
    await buildProgram(cli).parseAsync([...argv], { from: 'user' });
    return cli.outputClosed ? 0 : (cli.exitCode ?? 0);
  } catch (err) {
    // Help and version exit 0; a bad flag is a usage error, with commander's message already printed.
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : ERRORS.LT_USAGE.exit;
    // The reader of stdout has gone (`| head`): the failed write was unwanted. Quietly 0.
    if (cli.outputClosed) return 0;
    cli.live.end();
    // Loaded only when there is an error to say.
    const { reportCliError } = await import('./shared.ts');
    const status = reportCliError(err, (text) => void cli.stderr.write(text), cli.env);
    // The error is said: a connection a library still holds open must not keep the command alive.
    cli.hooks.exitAfter(3000);
    return status;
  } finally {
    cli.dispose();
  }
}
