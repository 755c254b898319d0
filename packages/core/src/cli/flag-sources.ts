import type { Argv } from 'yargs';
import { UsageError } from '../common/errors.js';
import { parseBoolean, parseNumber } from '../common/flag-values.js';
import { readConfigFile } from './config-file.js';
import { closestName } from './did-you-mean.js';
import { PASSWORD_MOVED_FROM } from './process-restart.js';

/** Flags whose values are never shown in a message. */
const SECRET_FLAGS = new Set(['user', 'password']);

const ORIGINS = Symbol('where each flag was given');

const ENV_PREFIX = 'ETCD_STEWARD_';
/** Variables of the prefix that are not flags. */
const OTHER_VARIABLES = new Set(['ETCD_STEWARD_DEBUG', PASSWORD_MOVED_FROM]);

interface Given {
  value: string | number | boolean;
  /** The flag, variable or config line that gave the value, for messages. */
  origin: string;
}

interface OptionTypes {
  names: Set<string>;
  aliasOf: Map<string, string>;
  aliases: Map<string, string[]>;
  booleans: Set<string>;
  numbers: Set<string>;
  arrays: Set<string>;
}

/**
 * Sets every flag from its sources, the first that has it winning: the command line, then `ETCD_STEWARD_<FLAG>`,
 * then the `--config` file. yargs reads only the command line, and reads yes/no values other than "true" as false
 * and a number it cannot read as NaN without saying where it came from; here each value is read once, by the
 * flag's type, and anything unreadable or unknown is a UsageError naming its source before any work.
 * Returns warnings for the log: an `ETCD_STEWARD_` variable that names no flag (a typo would otherwise go unseen,
 * since the environment may hold variables meant for other programs, it is not refused).
 */
export async function resolveFlags(
  argv: Record<string | symbol, unknown>,
  y: Argv,
  tokens: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<string[]> {
  const types = optionTypes(y);
  const fromArgv = scanCommandLine(tokens, types);
  const movedFrom = env[PASSWORD_MOVED_FROM];
  if (movedFrom !== undefined) {
    // Read once, here: a program this one starts does not inherit it.
    delete env[PASSWORD_MOVED_FROM];
    if (!types.names.has('password')) throw new UsageError(`unknown argument ${movedFrom} (see --help)`);
  }
  const fromEnv = new Map<string, Given>();
  for (const name of types.names) {
    const variable = variableOf(name);
    const value = env[variable];
    if (value !== undefined) fromEnv.set(name, { value, origin: `${variable}=${quote(name, value)}` });
  }
  const warnings = unknownVariables(env, types.names);
  const configPath = (fromArgv.get('config') ?? fromEnv.get('config'))?.value;
  const fromConfig = new Map<string, Given>();
  if (configPath !== undefined) {
    for (const [name, { value, where }] of await readConfigFile(String(configPath))) {
      if (!types.names.has(name) || name === 'config') {
        const guess = closestName(name, types.names);
        throw new UsageError(`${where} is not a setting${guess ? `: did you mean ${guess}?` : ''}`);
      }
      fromConfig.set(name, { value, origin: where });
    }
  }
  const origins = new Map<string, string>();
  for (const name of types.names) {
    const given = fromArgv.get(name) ?? fromEnv.get(name) ?? fromConfig.get(name);
    if (!given) continue;
    const value = types.booleans.has(name)
      ? parseBoolean(given.value, given.origin)
      : types.numbers.has(name)
        ? parseNumber(given.value, given.origin)
        : String(given.value);
    for (const key of [name, camelCase(name), ...(types.aliases.get(name) ?? [])]) argv[key] = value;
    origins.set(name, given.origin);
  }
  argv[ORIGINS] = origins;
  return warnings;
}

function variableOf(flag: string): string {
  return `${ENV_PREFIX}${flag.toUpperCase().replaceAll('-', '_')}`;
}

/** What to say of each `ETCD_STEWARD_` variable that sets no flag of this command; never its value. */
function unknownVariables(env: NodeJS.ProcessEnv, names: Set<string>): string[] {
  const known = new Set([...names].map(variableOf));
  return Object.keys(env)
    .filter((variable) => variable.startsWith(ENV_PREFIX) && !known.has(variable) && !OTHER_VARIABLES.has(variable))
    .sort()
    .map((variable) => {
      const guess = closestName(variable.slice(ENV_PREFIX.length), names);
      return `${variable} names no flag of this command and is ignored${guess ? `: did you mean ${variableOf(guess)}?` : ''}`;
    });
}

/**
 * How a flag's value was given, for messages about it: `--to-revision "0"`, `ETCD_STEWARD_TO_REVISION="0"` or
 * `to-revision (--config FILE line 3, column 1)`.
 */
export function flagGiven(args: object, flag: string, value: unknown): string {
  const origins = (args as { [ORIGINS]?: Map<string, string> })[ORIGINS];
  return origins?.get(flag) ?? `--${flag} ${quote(flag, value)}`;
}

function optionTypes(y: Argv): OptionTypes {
  const options = (y as unknown as { getOptions(): unknown }).getOptions() as {
    key: Record<string, unknown>;
    alias: Record<string, string[]>;
    boolean: string[];
    number: string[];
    array: string[];
  };
  const aliasOf = new Map<string, string>();
  for (const [name, aliases] of Object.entries(options.alias)) for (const alias of aliases) aliasOf.set(alias, name);
  const names = new Set(Object.keys(options.key).filter((key) => !aliasOf.has(key)));
  return {
    names,
    aliasOf,
    aliases: new Map(Object.entries(options.alias)),
    booleans: new Set(options.boolean),
    numbers: new Set(options.number),
    arrays: new Set(options.array),
  };
}

/** The flags on the command line, by name; unknown and repeated ones are refused, all at once. */
function scanCommandLine(tokens: readonly string[], types: OptionTypes): Map<string, Given> {
  const given = new Map<string, Given>();
  const problems: string[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i];
    if (token === '--') break;
    if (!token.startsWith('-') || token === '-' || /^-\d/.test(token)) continue;
    const dashes = token.startsWith('--') ? '--' : '-';
    const [written, inline] = splitOnce(token.slice(dashes.length), '=');
    let name = types.aliasOf.get(written) ?? written;
    const negated = !types.names.has(name) && name.startsWith('no-') && types.booleans.has(name.slice(3));
    if (negated) name = name.slice(3);
    if (!types.names.has(name)) {
      const guess = closestName(written, types.names);
      problems.push(`unknown argument ${dashes}${written}${guess ? ` (did you mean --${guess}?)` : ''}`);
      continue;
    }
    if (negated && inline !== undefined) {
      problems.push(`${dashes}${written} takes no value: write --${name}=${inline === 'true' ? 'false' : inline}`);
      continue;
    }
    let value: string | undefined;
    if (types.booleans.has(name)) {
      // As yargs reads them: only true or false may follow a yes/no flag as a separate word.
      value = inline ?? (/^(true|false)$/.test(tokens[i + 1] ?? '') ? tokens[++i] : 'true');
    } else if (inline !== undefined) {
      value = inline;
    } else if (i + 1 < tokens.length && !/^-[^\d]/.test(tokens[i + 1])) {
      value = tokens[++i];
    }
    if (value === undefined) {
      problems.push(`--${name} needs a value`);
      continue;
    }
    const origin = `${dashes}${written} ${quote(name, value)}`;
    if (given.has(name) && !types.arrays.has(name)) {
      problems.push(`--${name} is given more than once: give it once`);
      continue;
    }
    given.set(name, { value: negated ? false : value, origin });
  }
  if (problems.length > 0) throw new UsageError(`${problems.join('; ')} (see --help)`);
  return given;
}

function splitOnce(text: string, separator: string): [string, string | undefined] {
  const at = text.indexOf(separator);
  return at < 0 ? [text, undefined] : [text.slice(0, at), text.slice(at + 1)];
}

function quote(flag: string, value: unknown): string {
  return SECRET_FLAGS.has(flag) ? '(value not shown)' : JSON.stringify(String(value));
}

function camelCase(name: string): string {
  return name.replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase());
}
