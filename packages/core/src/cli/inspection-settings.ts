import type { Argv } from 'yargs';
import { UsageError } from '../common/errors.js';
import { parseRfc3339Nanos } from '../format/event-time.js';
import { type KeyFilter, keyFilter } from '../inspection/key-filter.js';
import type { RevisionWindow } from '../inspection/log-chain.js';
import { flagGiven } from './flag-sources.js';
import { tempDirOption } from './program.js';

/** `--prefix` and `--key`, the keys `etcd-restore log` and `get` look at. */
function keyOptions<T>(y: Argv<T>) {
  return y
    .option('prefix', {
      type: 'string',
      describe: 'The keys that start with this (as etcdctl get --prefix); with neither this nor --key, every key',
    })
    .option('key', { type: 'string', describe: 'This key alone' })
    .option('temp-dir', {
      ...tempDirOption,
      describe: 'Scratch space for what is downloaded and decompressed (removed at the end)',
    });
}

/** The flags of `etcd-restore log` (the store's with storeOption). */
export function logOptions<T>(y: Argv<T>) {
  return keyOptions(y)
    .option('from-revision', { type: 'number', describe: 'Only revisions from this one on' })
    .option('to-revision', { type: 'number', describe: 'Only revisions up to this one (default: the newest)' })
    .option('since', {
      type: 'string',
      describe: 'Only writes recorded at or after this moment (RFC 3339, to the nanosecond, as --to-time takes it)',
    })
    .option('until', { type: 'string', describe: 'Only writes recorded at or before this moment (as --since)' })
    .option('reverse', { type: 'boolean', default: false, describe: 'Oldest first (the default is newest first)' })
    .option('limit', { type: 'number', describe: 'At most this many rows (default: all)' })
    .option('all', {
      type: 'boolean',
      default: false,
      describe: 'A row for every key a revision wrote; without it, the keys one txn or del --prefix wrote are one row',
    })
    .option('max-fetchers', { type: 'number', default: 4, describe: 'Deltas downloaded ahead of the one being read' });
}

/** The flags of `etcd-restore get` (the store's with storeOption). */
export function getOptions<T>(y: Argv<T>) {
  return keyOptions(y)
    .option('to-revision', { type: 'number', describe: 'The revision to read (default: the newest)' })
    .option('to-time', {
      type: 'string',
      describe: 'The state at this moment, found as etcd-restore --to-time finds it (RFC 3339, to the nanosecond)',
    })
    .option('values', {
      type: 'boolean',
      default: false,
      describe: 'Print the values too: base64 in JSON (as etcdctl), text in the table where it is printable',
    })
    .option('allow-partial', {
      type: 'boolean',
      default: false,
      describe:
        'As etcd-restore --allow-partial: a damaged or missing delta, or a --to-time not watched live, reads the last revision known good, and says so',
    })
    .option('etcd-bin-dir', { type: 'string', describe: "Where etcd's restore tool is (etcdutl, or etcdctl for 3.4)" });
}

interface KeyArgs {
  prefix?: string;
  key?: string;
  'temp-dir': string;
}

export interface LogArgs extends KeyArgs {
  'from-revision'?: number;
  'to-revision'?: number;
  since?: string;
  until?: string;
  reverse: boolean;
  limit?: number;
  all: boolean;
  'max-fetchers': number;
}

export interface GetArgs extends KeyArgs {
  'to-revision'?: number;
  'to-time'?: string;
  values: boolean;
  'allow-partial': boolean;
  'etcd-bin-dir'?: string;
}

/** `etcd-restore log`'s flags checked together; each misuse a UsageError (exit 2) before anything is read. */
export function logSettings(args: LogArgs): {
  filter: KeyFilter;
  window: RevisionWindow;
  since?: bigint;
  until?: bigint;
  oldestFirst: boolean;
  limit?: number;
  all: boolean;
  maxFetchers: number;
  tmpDir: string;
} {
  const filter = keyFilter(args);
  const from = revision(args, 'from-revision');
  const to = revision(args, 'to-revision');
  if (from !== undefined && to !== undefined && from > to) {
    throw new UsageError(`--from-revision ${from} is after --to-revision ${to}: give the older one first`);
  }
  const since = moment(args, 'since');
  const until = moment(args, 'until');
  if (since !== undefined && until !== undefined && since > until) {
    throw new UsageError(`--since ${args.since} is after --until ${args.until}: give the earlier one first`);
  }
  return {
    filter,
    window: { from, to },
    since,
    until,
    oldestFirst: args.reverse,
    limit: whole(args, 'limit', 1, Number.MAX_SAFE_INTEGER),
    all: args.all,
    maxFetchers: whole(args, 'max-fetchers', 1, 64) as number,
    tmpDir: tmpDir(args),
  };
}

/** `etcd-restore get`'s flags checked together. */
export function getSettings(args: GetArgs): {
  filter: KeyFilter;
  toRevision?: number;
  toTime?: Date;
  toTimeNanos?: bigint;
  values: boolean;
  allowPartial: boolean;
  tmpDir: string;
  etcdBinDir?: string;
} {
  const filter = keyFilter(args);
  const toRevision = revision(args, 'to-revision');
  const toTimeNanos = moment(args, 'to-time');
  if (toRevision !== undefined && toTimeNanos !== undefined) {
    throw new UsageError('--to-revision and --to-time both choose the point to read: give one');
  }
  return {
    filter,
    toRevision,
    ...(toTimeNanos !== undefined ? { toTimeNanos, toTime: new Date(Number(toTimeNanos / 1_000_000n)) } : {}),
    values: args.values,
    allowPartial: args['allow-partial'],
    tmpDir: tmpDir(args),
    etcdBinDir: args['etcd-bin-dir'],
  };
}

function revision(args: object, flag: string): number | undefined {
  return whole(args, flag, 1, Number.MAX_SAFE_INTEGER, 'is not a revision: give a whole number ≥ 1');
}

function whole(args: object, flag: string, min: number, max: number, why?: string): number | undefined {
  const value = (args as Record<string, unknown>)[flag] as number | undefined;
  if (value === undefined) return undefined;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new UsageError(`${flagGiven(args, flag, value)} ${why ?? `must be a whole number from ${min} to ${max}`}`);
  }
  return value;
}

function moment(args: object, flag: string): bigint | undefined {
  const text = (args as Record<string, unknown>)[flag] as string | undefined;
  if (text === undefined) return undefined;
  const nanos = parseRfc3339Nanos(text);
  if (nanos === undefined) {
    throw new UsageError(`${flagGiven(args, flag, text)} is not an RFC 3339 time; write e.g. 2026-11-21T22:15:00Z`);
  }
  return nanos;
}

function tmpDir(args: KeyArgs): string {
  if (!args['temp-dir'].trim()) throw new UsageError('--temp-dir is empty: name a folder for scratch space');
  return args['temp-dir'];
}
