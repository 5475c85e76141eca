// The commander Command of this CLI: what commander does, plus what gh and kubectl do for a person who
// mistyped. An unknown flag that a known one begins (or that begins a known one) gets "did you mean"
// too: commander's own guess is by edit distance, so `--organization` found nothing near `--org`.
// Required flags say "(required)" in --help (commander marks them nowhere).
import { Command, Help, type Option } from 'commander';

/** The long flags a command takes, its parents' too (a flag of the program works after the command). */
function longFlags(command: Command): string[] {
  const flags: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) {
    for (const option of c.createHelp().visibleOptions(c)) if (option.long) flags.push(option.long);
  }
  return [...new Set(flags)];
}

/**
 * The known flags `flag` is a longer or shorter form of (`--organization` for `--org`, `--dry` for
 * `--dry-run`): the longest known flag it begins with, else those that begin with it. None under 3 letters.
 */
export function prefixSuggestions(flag: string, known: readonly string[]): string[] {
  const word = flag.replace(/^--/, '').replace(/=.*$/, '').toLowerCase();
  if (word.length < 3) return [];
  const names = known.map((k) => k.replace(/^--/, ''));
  const within = names.filter((n) => n.length >= 3 && word.startsWith(n)).sort((a, b) => b.length - a.length);
  if (within[0]) return [`--${within[0]}`];
  return names.filter((n) => n.startsWith(word)).map((n) => `--${n}`);
}

export class PlainCommand extends Command {
  override createCommand(name?: string): Command {
    return new PlainCommand(name);
  }

  override createHelp(): Help {
    return Object.assign(new PlainHelp(), this.configureHelp());
  }

  /** commander's unknown option, with a guess by prefix when its own finds nothing. */
  unknownOption(flag: string): void {
    const guesses = flag.startsWith('--') ? prefixSuggestions(flag, longFlags(this)) : [];
    if (guesses.length === 0) {
      // commander's own (by edit distance), which says "did you mean" when it finds one; it returns
      // only when the command allows unknown options.
      (Command.prototype as unknown as { unknownOption(this: Command, f: string): void }).unknownOption.call(
        this,
        flag,
      );
      return;
    }
    const guess =
      guesses.length === 1 ? `(Did you mean ${guesses[0]}?)` : `(Did you mean one of ${guesses.join(', ')}?)`;
    this.error(`error: unknown option '${flag}'\n${guess}`, { code: 'commander.unknownOption' });
  }
}

/** Help that marks the flags a command cannot run without. */
export class PlainHelp extends Help {
  override optionDescription(option: Option): string {
    const text = super.optionDescription(option);
    return option.mandatory ? `${text} (required)` : text;
  }
}
