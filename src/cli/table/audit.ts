// `audit` and `audit forget` in the command table: its flags and help.
// The command itself is cli/audit.ts, imported when it runs.
import { Option, type Command } from 'commander';
import type { Cli } from '../io.ts';
import { dateOption, emailOption, learnerIdOption, userIdOption } from '../parsers.ts';

export function register(program: Command, cli: Cli): void {
  registerForget(registerAudit(program, cli), cli);
}

function registerAudit(program: Command, cli: Cli): Command {
  return program
    .command('audit')
    .description(
      'Export the audit record of every transfer (groups removed and added, authorizations revoked) as NDJSON, ' +
        'from the archive files then the stream',
    )
    .option('--org <key...>', 'only these organizations')
    .option('--run <id>', 'only transfers of this run')
    .addOption(new Option('--learner <id>', 'only this learner').argParser(learnerIdOption('--learner')))
    .addOption(
      new Option('--since <date>', 'only entries written from this UTC day or time on').argParser(
        dateOption('--since', false),
      ),
    )
    .addOption(
      new Option('--until <date>', 'only entries written up to this UTC day (included) or time').argParser(
        dateOption('--until', true),
      ),
    )
    .option('--archive <dir>', 'the audit archive to read too (default AUDIT_ARCHIVE_DIR)')
    .option('--out <file>', 'write here instead of stdout')
    .option(
      '--redact',
      'write without the e-mail addresses and names of the revoked authorizations (docs/exports.md)',
    )
    .option(
      '--trim',
      'once FILE is on disk and read back, trim the exported entries from Redis (needs --out)',
    )
    .action(async (opts) => (await import('../audit.ts')).auditCommand(cli, opts));
}

function registerForget(audit: Command, cli: Cli): void {
  audit
    .command('forget')
    .description(
      'Erase one person from the audit (Redis, the archive, the spool, kept bodies): their e-mail address, ' +
        'name and user id are replaced by a marker saying when and why (docs/personal-data.md)',
    )
    .addOption(
      new Option('--email <address>', 'the person, by e-mail address (any case)').argParser(emailOption),
    )
    .addOption(new Option('--user-id <n>', "the person, by the service's user id").argParser(userIdOption))
    .option('--archive <dir>', 'the audit archive (default AUDIT_ARCHIVE_DIR)')
    .option('--dry-run', 'say what would change, and change nothing')
    .action(async (opts) => (await import('../audit.ts')).forgetCommand(cli, opts));
}
