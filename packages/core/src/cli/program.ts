import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import type { Argv } from 'yargs';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { errorMessage, StewardError, UsageError } from '../common/errors.js';
import { createLogger, LOG_LEVELS, type Logger, type LogLevel } from '../common/logger.js';
import { readKeyFile } from '../format/encryption/encryption-keys.js';
import { ebrStoreUrl, storeUrlFromProviderFlags } from '../store/provider-flags.js';
import { checkCommandGiven, recordCommandNames } from './command-names.js';
import { resolveFlags } from './flag-sources.js';

/** The toolkit's version, one for all its programs: core's, which every program is built with. */
export const toolkitVersion: string = JSON.parse(
  readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
).version;

/** `--log-level` as parsed; what runProgram's and reportUsage's loggers show. */
let logLevel: LogLevel = 'info';

/**
 * What every program shares on its command line. Precedence: flags > environment (`ETCD_STEWARD_<FLAG>`,
 * e.g. ETCD_STEWARD_STORE) > a YAML file given with `--config` > defaults.
 */
export function programArgs(name: string, argv = hideBin(process.argv)): Argv {
  const y = yargs(argv);
  const commands = recordCommandNames(y);
  return (
    y
      .scriptName(name)
      .option('config', {
        type: 'string',
        describe: 'YAML (or JSON) file of settings: a flat map of flag names to values',
      })
      .option('output', {
        choices: ['text', 'json'] as const,
        default: 'text' as const,
        describe: 'Result format on stdout; logs go to stderr (JSON lines when not a terminal)',
      })
      .option('log-level', {
        choices: LOG_LEVELS,
        default: 'info' as const,
        describe: 'The least severe log lines shown on stderr: error, warn, or info (with progress)',
      })
      .completion('completion', 'Print a bash or zsh completion script, to source from ~/.bashrc or ~/.zshrc')
      .middleware((args) => {
        try {
          checkCommandGiven(name, commands, args._);
        } catch (err) {
          reportUsage(err);
        }
      }, true)
      // yargs passes itself to middleware, though its types do not say so.
      .middleware(
        (async (args: Record<string, unknown>, y: Argv) => {
          let warnings: string[];
          try {
            warnings = await resolveFlags(args, y, argv);
          } catch (err) {
            reportUsage(err); // yargs does not route middleware errors to .fail()
          }
          // Once every source is read (the level may come from the environment or --config), and before
          // validation, so that a usage error is logged as asked; an unknown level is left to validation.
          const level = args['log-level'] as LogLevel;
          if (LOG_LEVELS.includes(level)) logLevel = level;
          const logger = createLogger({ json: args.output === 'json' ? true : undefined, level: logLevel });
          for (const warning of warnings) logger.warn(warning);
        }) as unknown as (args: Record<string, unknown>) => void,
        true,
      )
      .strict()
      .wrap(Math.min(120, process.stdout.columns || 100))
      .fail((msg, err) => reportUsage(err ?? new UsageError(`${msg} (see --help)`)))
      .help()
      .alias('help', 'h')
      .version(toolkitVersion)
  );
}

/** `--store` and ebr's provider flags; `required: false` for a program that can do without a store. */
export function storeOption<T, Required extends boolean = true>(y: Argv<T>, options: { required?: Required } = {}) {
  return (
    y
      .option('store', {
        type: 'string',
        demandOption: (options.required ?? true) as Required,
        describe:
          'Where snapshots live: file:///path, s3://bucket/prefix, gs://bucket/prefix, azblob://container/prefix, swift://container/prefix, oss://bucket/prefix, ecs://bucket/prefix, ocs://bucket/prefix',
      })
      .option('storage-provider', {
        type: 'string',
        describe:
          "ebr's way to name the store, instead of --store: S3, GCS, ABS, Swift, OSS, ECS, OCS or Local, with --store-container",
      })
      .option('store-container', {
        type: 'string',
        describe: 'With --storage-provider: bucket or container (Local: a folder under $HOME, as ebr reads it)',
      })
      .option('store-prefix', { type: 'string', describe: 'With --storage-provider: prefix inside the container' })
      .option('encryption-key-file', {
        type: 'string',
        describe:
          'File of keys ("<key id> <key>" a line, docs/encryption.md): snapshots written are encrypted with the first, those read decrypted with any; without it nothing is encrypted',
      })
      // ebr's flags become a --store URL before validation, so existing manifests keep working.
      .middleware(providerFlagsMiddleware('store', ''), true)
      .check(keyFilesReadable)
  );
}

/**
 * Key files are read before any work, so a missing or malformed one is a usage error (exit 2), never a late failure:
 * for a command's `.check` where it takes `--encryption-key-file` without `storeOption`.
 */
export function keyFilesReadable(argv: Record<string, unknown>): true {
  for (const flag of ['encryption-key-file', 'source-encryption-key-file']) {
    const path = argv[flag];
    if (typeof path === 'string') readKeyFile(path);
  }
  return true;
}

/**
 * `--from` and `--to` of a program that moves backups between two stores, with ebr's flags for each: the
 * destination's as ebr names the store (`--storage-provider`...), the source's with `source-` before them.
 */
export function storePairOptions<T>(y: Argv<T>) {
  const described = (what: string) =>
    `${what} store: file:///path, s3://bucket/prefix, gs://bucket/prefix, azblob://container/prefix, swift://container/prefix, oss://bucket/prefix, ecs://bucket/prefix, ocs://bucket/prefix`;
  return y
    .option('from', { type: 'string', describe: described('The source') })
    .option('to', { type: 'string', describe: described('The destination') })
    .option('source-storage-provider', { type: 'string', describe: "ebr's way to name the source, instead of --from" })
    .option('source-store-container', { type: 'string', describe: 'With --source-storage-provider' })
    .option('source-store-prefix', { type: 'string', describe: 'With --source-storage-provider' })
    .option('storage-provider', { type: 'string', describe: "ebr's way to name the destination, instead of --to" })
    .option('store-container', { type: 'string', describe: 'With --storage-provider' })
    .option('store-prefix', { type: 'string', describe: 'With --storage-provider' })
    .option('encryption-key-file', {
      type: 'string',
      describe:
        'File of keys (docs/encryption.md): the destination is encrypted with the first; the source is decrypted with any, unless --source-encryption-key-file is given',
    })
    .option('source-encryption-key-file', {
      type: 'string',
      describe: 'File of keys that decrypt the source (default: --encryption-key-file); copying re-encrypts',
    })
    .middleware(providerFlagsMiddleware('from', 'source-'), true)
    .check(keyFilesReadable)
    .middleware(providerFlagsMiddleware('to', ''), true)
    .check((argv) => {
      for (const flag of ['from', 'to']) {
        if (argv[flag] === undefined) throw new UsageError(`give --${flag} (a store URL)`);
      }
      return true;
    });
}

/** Turns ebr's `--<prefix>storage-provider`, `-container` and `-prefix` into the URL flag `urlFlag`. */
function providerFlagsMiddleware(urlFlag: string, prefix: string) {
  return (argv: Record<string, unknown>) => {
    const provider = argv[`${prefix}storage-provider`] as string | undefined;
    if (provider === undefined) return;
    try {
      if (argv[urlFlag] !== undefined) {
        throw new UsageError(`give --${urlFlag} or --${prefix}storage-provider, not both`);
      }
      const flags = {
        provider,
        container: (argv[`${prefix}store-container`] as string | undefined) ?? '',
        prefix: argv[`${prefix}store-prefix`] as string | undefined,
      };
      // Local: the folder ebr reads, $HOME/<container>/<prefix>, as etcdbrctl reads it (one reading of ebr's flags)
      const local = provider.trim().toUpperCase() === 'LOCAL' && flags.container !== '';
      argv[urlFlag] = local
        ? ebrStoreUrl(flags, { HOME: process.env.HOME }, { source: prefix === 'source-' })
        : storeUrlFromProviderFlags(flags);
    } catch (err) {
      reportUsage(err); // yargs does not route middleware errors to .fail()
    }
  };
}

export const tempDirOption = {
  type: 'string',
  default: tmpdir(),
  describe: 'Scratch space (same file system as the target where possible)',
} as const;

export interface CommandContext {
  logger: Logger;
  /** Aborted on SIGTERM or SIGINT: work stops, temp files go, nothing half-written stays. */
  signal: AbortSignal;
  output: 'text' | 'json';
}

/**
 * Runs one command and turns its outcome into the exit code: 0 done, 1 failed, 2 bad usage — with a
 * one-line error that says what to do, never a bare stack trace.
 */
export async function runProgram(
  outputFlag: unknown,
  // biome-ignore lint/suspicious/noConfusingVoidType: commands without a verdict (all but validate) return nothing
  command: (ctx: CommandContext) => Promise<number | void>,
): Promise<never> {
  const output = outputFlag === 'json' ? 'json' : 'text';
  const logger = createLogger({ json: output === 'json' ? true : undefined, level: logLevel });
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    logger.warn(`received ${signal}: stopping`, {});
    controller.abort(new StewardError(`stopped by ${signal}`, 1));
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  let code: number;
  try {
    code = (await command({ logger, signal: controller.signal, output })) ?? 0;
  } catch (err) {
    code = err instanceof StewardError ? err.exitCode : 1;
    const reason = controller.signal.aborted ? controller.signal.reason : err;
    logger.error(errorMessage(reason));
    if (!(err instanceof StewardError) && process.env.ETCD_STEWARD_DEBUG) console.error(err);
  }
  // Writes to a pipe are asynchronous: exiting now would cut a large result (a JSON report) short.
  await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
  process.exit(code);
}

/** For `.parseAsync()` failures (unknown flag, missing option): usage errors before any work, logged as any error. */
export function reportUsage(err: unknown): never {
  const code = err instanceof StewardError ? err.exitCode : 2;
  // One line, always: yargs spreads some messages (invalid choices) over several.
  createLogger({ level: logLevel }).error(errorMessage(err).replace(/\s*\n\s*/g, ' '));
  process.exit(code);
}
