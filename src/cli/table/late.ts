// A flag whose parser the table does not load (late-parsers.ts): read as text, then checked once
// the flags are read and before the action, by a preAction hook that imports the parser. A bad
// value is said in commander's own words ("error: option '--x <v>' argument 'y' is invalid. ..."),
// a usage error (exit 2); `--help` runs no action, so it loads nothing.
import { InvalidArgumentError, type Command, type Option } from 'commander';
import type { LateParser } from '../late-parsers.ts';

export function addLateOption(command: Command, option: Option, parser: LateParser): Command {
  command.addOption(option);
  return command.hook('preAction', async () => {
    const key = option.attributeName();
    const raw: unknown = command.getOptionValue(key);
    if (typeof raw !== 'string') return;
    const { LATE_PARSERS } = await import('../late-parsers.ts');
    let value: unknown;
    try {
      value = LATE_PARSERS[parser](raw);
    } catch (err) {
      if (!(err instanceof InvalidArgumentError)) throw err;
      command.error(`error: option '${option.flags}' argument '${raw}' is invalid. ${err.message}`, {
        exitCode: err.exitCode,
        code: err.code,
      });
    }
    command.setOptionValueWithSource(key, value, command.getOptionValueSource(key) ?? 'cli');
  });
}
