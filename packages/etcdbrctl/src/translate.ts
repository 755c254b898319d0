import { UsageError } from '@etcd-steward/core/common';
import { ebrStoreUrl } from '@etcd-steward/core/store';
import { EBR_COMMANDS, EBR_FLAGS, type EbrCommand, type EbrFlag, findEbrFlag } from './ebr-flags.js';

/** One of our programs, with the command line and environment an ebr command line becomes. */
export interface ProgramRun {
  /** Package and bin of the program (commands.ts). */
  program: ProgramName;
  args: string[];
  /** Variables added to the program's environment. */
  env: Record<string, string>;
  /** Flags given that have no effect here, with why: logged once at start. */
  noEffect: { flag: string; reason: string }[];
  /** What the run needs before it starts: scratch folders ebr would create. */
  createDirs: string[];
  /** compact with --enable-snapshot-lease-renewal: the Lease renewed after the compacted snapshot is stored. */
  fullSnapshotLease?: string;
  /** The store the program works on (compact: where the newest full snapshot is read for the Lease). */
  store?: string;
}

export type ProgramName = 'etcd-snapshot' | 'etcd-restore' | 'etcd-compact' | 'etcd-validate' | 'etcd-copy-backups';

/** Each ebr subcommand, as our program and its command. */
const PROGRAMS: Record<EbrCommand, { program: ProgramName; args: string[]; about: string }> = {
  server: { program: 'etcd-snapshot', args: ['run'], about: 'etcd-snapshot run: the sidecar' },
  snapshot: {
    program: 'etcd-snapshot',
    args: ['run', '--no-server'],
    about: 'etcd-snapshot run --no-server: snapshots without the HTTP API, as ebr snapshot',
  },
  restore: { program: 'etcd-restore', args: [], about: 'etcd-restore' },
  compact: { program: 'etcd-compact', args: [], about: 'etcd-compact, then the full-snapshot Lease' },
  initialize: { program: 'etcd-validate', args: ['bootstrap'], about: 'etcd-validate bootstrap' },
  copy: { program: 'etcd-copy-backups', args: ['copy'], about: 'etcd-copy-backups copy' },
};

export function programOf(command: EbrCommand): { program: ProgramName; args: string[]; about: string } {
  return PROGRAMS[command];
}

export function isEbrCommand(word: string): word is EbrCommand {
  return (EBR_COMMANDS as readonly string[]).includes(word);
}

const BOOLEANS = new Map([
  ...['1', 't', 'T', 'true', 'TRUE', 'True'].map((v) => [v, true] as const),
  ...['0', 'f', 'F', 'false', 'FALSE', 'False'].map((v) => [v, false] as const),
]);

/**
 * Reads an ebr command line as ebr's flag parser (spf13/pflag) does: `--flag=value`, `--flag value`, a yes/no flag
 * alone or with `=value`, `-s value`, list flags repeated or comma-separated, the last of a repeated flag winning.
 * Unknown flags, flags of another subcommand and stray words are refused, all at once, with exit 2.
 */
export function parseEbrArgs(command: EbrCommand, tokens: readonly string[]): Map<string, string> {
  const given = new Map<string, string>();
  const problems: string[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i];
    const match = /^(--?)([^=]+)(?:=(.*))?$/s.exec(token);
    if (!match || token === '-' || token === '--') {
      problems.push(`"${token}" is not a flag: ebr's ${command} takes flags only`);
      continue;
    }
    const [, dashes, written, inline] = match;
    const flag = dashes === '-' && written.length !== 1 ? undefined : findEbrFlag(written);
    if (!flag || (dashes === '-') !== (flag.short === written)) {
      problems.push(`unknown flag ${dashes}${written}: etcd-backup-restore v0.23 to v0.43 has no such flag`);
      continue;
    }
    if (!flag.commands.includes(command)) {
      problems.push(`--${flag.name} is not a flag of ebr's ${command} (it belongs to ${flag.commands.join(', ')})`);
      continue;
    }
    let value = inline;
    if (value === undefined) {
      if (flag.kind === 'bool') value = 'true';
      else if (i + 1 < tokens.length) value = tokens[++i];
      else {
        problems.push(`--${flag.name} needs a value`);
        continue;
      }
    }
    const problem = checkValue(flag, value);
    if (problem) {
      problems.push(problem);
      continue;
    }
    if (flag.kind === 'bool') value = String(BOOLEANS.get(value));
    const before = given.get(flag.name);
    given.set(flag.name, flag.kind === 'list' && before !== undefined ? `${before},${value}` : value);
  }
  if (problems.length > 0) throw new UsageError(`${problems.join('; ')} (see etcdbrctl ${command} --help)`);
  return given;
}

function checkValue(flag: EbrFlag, value: string): string | undefined {
  if (flag.kind === 'bool' && !BOOLEANS.has(value)) return `--${flag.name}=${value}: give true or false`;
  if (flag.kind === 'int' && !/^-?\d+$/.test(value)) return `--${flag.name}=${value}: give a whole number`;
  if (flag.kind === 'duration' && !/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$|^0$/.test(value)) {
    return `--${flag.name}=${value}: give a Go duration such as 30s or 1m0s`;
  }
  return undefined;
}

/**
 * An ebr command line as one of our programs runs it: each flag by the table (ebr-flags.ts), ebr's defaults where
 * ours differ, the store from ebr's flags and variables, the flags with no effect here collected for the log line.
 */
export function translate(command: EbrCommand, tokens: readonly string[], env: NodeJS.ProcessEnv): ProgramRun {
  const given = parseEbrArgs(command, tokens);
  const { program, args: commandArgs } = PROGRAMS[command];
  const run: ProgramRun = { program, args: [...commandArgs], env: {}, noEffect: [], createDirs: [] };
  for (const flag of EBR_FLAGS) {
    if (!flag.commands.includes(command)) continue;
    const value = given.get(flag.name);
    const effect = flag.effect;
    if ('refused' in effect) {
      if (value !== undefined) throw new UsageError(`--${flag.name}: ${effect.refused}`);
    } else if ('noEffect' in effect) {
      if (value !== undefined) run.noEffect.push({ flag: flag.name, reason: effect.noEffect });
    } else if ('map' in effect) {
      const used = value ?? (effect.applyDefault ? flag.ebrDefault : undefined);
      if (used === undefined) continue;
      const translation = effect.map(used, command);
      if (typeof translation === 'string') {
        if (value !== undefined) run.noEffect.push({ flag: flag.name, reason: translation });
        continue;
      }
      run.args.push(...translation.args);
      Object.assign(run.env, translation.env);
    }
  }
  special(command, given, env, run);
  return run;
}

/** The flags read together or kept off the command line: the store, scratch space, compression, the password. */
function special(command: EbrCommand, given: Map<string, string>, env: NodeJS.ProcessEnv, run: ProgramRun): void {
  const password = given.get('etcd-password');
  if (password !== undefined) run.env.ETCD_STEWARD_PASSWORD = password;

  // ebr's server and snapshot run without a snapshotter when no provider is named; the others fall back to Local.
  const sidecar = command === 'server' || command === 'snapshot';
  const store = (prefix: '' | 'source-') =>
    ebrStoreUrl(
      {
        provider: given.get(`${prefix}storage-provider`) || 'Local',
        container: given.get(`${prefix}store-container`),
        prefix: given.get(`${prefix}store-prefix`),
        endpointOverride: given.get(`${prefix}store-endpoint-override`),
      },
      env,
      { source: prefix === 'source-' },
    );
  const url = sidecar && !given.get('storage-provider') ? undefined : store('');
  if (command === 'copy') {
    const from = store('source-');
    if (from === undefined || url === undefined) {
      throw new UsageError('copy needs both stores: --source-storage-provider and --storage-provider');
    }
    run.args.push(`--from=${from}`, `--to=${url}`);
  } else if (url !== undefined) {
    run.args.push(`--store=${url}`);
    run.store = url;
  } else if (command === 'server') {
    run.args.push('--no-snapshotter');
  } else {
    throw new UsageError(`ebr's ${command} needs a store: give --storage-provider (and --store-container)`);
  }

  const tempDir = given.get('snapstore-temp-directory') ?? '/tmp';
  run.createDirs.push(tempDir);
  if (sidecar) {
    // The spool lives where ebr keeps its temporary files, on the volume the pod's user can write (etcd's data
    // volume under etcd-druid), and survives restarts there; the sidecar's scratch space is inside it by default.
    run.args.push(`--spool-dir=${tempDir.replace(/\/+$/, '')}/etcd-steward-spool`);
  } else if (command === 'compact') {
    run.args.push(`--temp-dir=${tempDir}`);
  }

  if (sidecar) run.args.push(`--compression=${compression(given)}`);
  if (command === 'compact') {
    // ebr compacts into a snapshot compressed as its default says: gzip.
    run.args.push('--compression=gzip');
    if (given.get('enable-snapshot-lease-renewal') === 'true') {
      run.fullSnapshotLease = given.get('full-snapshot-lease-name') ?? 'full-snapshot-revisions';
    }
  }
}

/** `--compress-snapshots` (default true since ebr v0.40) and `--compression-policy` as our `--compression`. */
function compression(given: Map<string, string>): string {
  if (given.get('compress-snapshots') === 'false') return 'none';
  const policy = given.get('compression-policy') ?? 'gzip';
  if (policy === 'gzip' || policy === 'zlib') return policy;
  if (policy === 'lzw') {
    throw new UsageError(
      '--compression-policy=lzw: lzw snapshots are read here but not written; give --compression-policy=gzip (ebr reads it too)',
    );
  }
  throw new UsageError(`--compression-policy=${policy}: give gzip, zlib or lzw, as ebr`);
}
