import { mkdir } from 'node:fs/promises';
// Core's folders one by one, and the rest when needed: etcdbrctl starts fast and becomes the program.
import { createLogger, errorMessage, StewardError, UsageError } from '@etcd-steward/core/common';
import { EBR_COMMANDS, EBR_FLAGS, type EbrCommand } from './ebr-flags.js';
import { becomeProgram, runProgram } from './program-bin.js';
import { isEbrCommand, programOf, translate } from './translate.js';

const logger = createLogger();

function usage(): string {
  const commands = EBR_COMMANDS.map((c) => `  ${c.padEnd(11)}${programOf(c).about}`).join('\n');
  return `etcdbrctl: etcd-backup-restore's command line, run by etcd-steward's programs (docs/moving-from-ebr.md)

Usage: etcdbrctl COMMAND [ebr's flags]

Commands:
${commands}

Options:
  --help, -h     this text; etcdbrctl COMMAND --help lists a command's flags
  --version, -v  the toolkit's version

Every flag of etcd-backup-restore v0.23 to v0.43 is accepted with ebr's meaning; those with no effect here are
named in one log line at start.
`;
}

function commandUsage(command: EbrCommand): string {
  const rows = EBR_FLAGS.filter((f) => f.commands.includes(command)).map((f) => {
    const names = `${f.short ? `-${f.short}, ` : '    '}--${f.name}`;
    return `  ${names.padEnd(46)}${f.meaning} (ebr default ${f.ebrDefault})`;
  });
  return `Usage: etcdbrctl ${command} [flags]: ${programOf(command).about}\n\nFlags:\n${rows.join('\n')}\n`;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(usage());
    return command === undefined ? 2 : 0;
  }
  if (command === '--version' || command === '-v') {
    const { toolkitVersion } = await import('@etcd-steward/core/cli');
    process.stdout.write(`${toolkitVersion}\n`);
    return 0;
  }
  if (!isEbrCommand(command)) {
    logger.error(`unknown command "${command}": give one of ${EBR_COMMANDS.join(', ')} (see etcdbrctl --help)`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(commandUsage(command));
    return 0;
  }
  const run = translate(command, rest, process.env);
  if (run.noEffect.length > 0) {
    // One line, the flags that share a reason together.
    const byReason = new Map<string, string[]>();
    for (const { flag, reason } of run.noEffect) byReason.set(reason, [...(byReason.get(reason) ?? []), `--${flag}`]);
    const parts = [...byReason].map(([reason, flags]) => `${flags.join(', ')} (${reason})`);
    logger.info(`accepted with no effect here: ${parts.join('; ')}`);
  }
  // ebr creates its scratch folder when it is missing; so does etcdbrctl, for the user the pod runs as.
  for (const dir of run.createDirs) {
    await mkdir(dir, { recursive: true, mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
      throw new UsageError(
        `--snapstore-temp-directory ${dir}: cannot create it (${err.code ?? err.message}); give a folder the pod's user can write`,
      );
    });
  }
  const env = { ...process.env, ...run.env };
  if (!run.fullSnapshotLease) return becomeProgram(run.program, run.args, env);
  const code = await runProgram(run.program, run.args, env);
  if (code === 0 && run.store) {
    const { renewFullSnapshotLease } = await import('./compact-lease.js');
    await renewFullSnapshotLease({ store: run.store, leaseName: run.fullSnapshotLease, env: process.env }, logger);
  }
  return code;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    logger.error(errorMessage(err));
    process.exit(err instanceof StewardError ? err.exitCode : 1);
  },
);
