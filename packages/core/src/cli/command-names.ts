import type { Argv } from 'yargs';
import { UsageError } from '../common/errors.js';
import { closestName } from './did-you-mean.js';

/** The sub-commands a program declares, filled in as it declares them. */
export interface CommandNames {
  names: string[];
  /** A command is also `$0`: it runs when none is named. */
  hasDefault: boolean;
}

/**
 * Records the commands declared on `y` from here on. yargs keeps them to itself, and once it runs a default
 * command (a mistyped name is then taken as its argument) a middleware can no longer ask for them.
 */
export function recordCommandNames(y: Argv): CommandNames {
  const recorded: CommandNames = { names: [], hasDefault: false };
  const declare = y.command.bind(y) as (...args: unknown[]) => Argv;
  (y as { command: unknown }).command = (command: unknown, ...rest: unknown[]) => {
    for (const spelling of [command].flat()) {
      if (typeof spelling !== 'string') continue;
      const name = spelling.split(' ')[0];
      if (name === '$0') recorded.hasDefault = true;
      else recorded.names.push(name);
    }
    return declare(command, ...rest);
  };
  return recorded;
}

/**
 * A program with sub-commands is told which one to run before its flags are read: otherwise a mistyped command
 * shows up as "unknown argument --data-dir", a flag of the command meant. Names the nearest command.
 */
export function checkCommandGiven(program: string, commands: CommandNames, positionals: unknown[]): void {
  // every program has `completion` (programArgs adds it): it alone makes no sub-commands
  const names = commands.names.filter((n) => n !== 'completion');
  if (names.length === 0) return;
  const list = names.join(', ');
  const given = positionals[0];
  if (given === undefined) {
    if (commands.hasDefault) return;
    throw new UsageError(`${program} needs a command first: one of ${list} (see --help)`);
  }
  if (commands.names.includes(String(given))) return;
  const guess = closestName(String(given), names);
  throw new UsageError(
    `${program} has no command "${given}"${guess ? `: did you mean ${guess}?` : ''} Its commands: ${list} (see --help)`,
  );
}
