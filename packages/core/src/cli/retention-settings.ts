import type { Argv } from 'yargs';
import { UsageError } from '../common/errors.js';
import { parseByteSize, parseDuration } from '../common/flag-values.js';
import { Calendar } from '../retention/calendar.js';
import { EBR_POLICIES, type EbrPolicy } from '../retention/ebr-policies.js';
import { hasKeepRules, type KeepRules } from '../retention/keep-rules.js';
import type { RetentionPolicy } from '../retention/retention-plan.js';
import { flagGiven } from './flag-sources.js';

/** ebr's flags for its policies, with ebr's defaults: etcd-gc and the sidecar's garbage collector both take them. */
export function ebrRetentionOptions<T>(y: Argv<T>, options: { policyDefault?: (typeof EBR_POLICIES)[number] } = {}) {
  return y
    .option('garbage-collection-policy', {
      choices: EBR_POLICIES,
      ...(options.policyDefault ? { default: options.policyDefault } : {}),
      describe:
        "ebr's policy for full snapshots: Exponential keeps every full of the current hour, then the newest of each hour today, of each of the 7 days before, of each week up to 5 weeks back; LimitBased the newest --max-backups (docs/gc.md §2)",
    })
    .option('max-backups', {
      alias: 'm',
      type: 'number',
      default: 7,
      describe: 'With LimitBased: how many full snapshots to keep, as ebr',
    })
    .option('delta-snapshot-retention-period', {
      type: 'string',
      default: '0',
      describe:
        "Deltas older than this go, except those of the newest restorable chain, which stay; 0 (ebr's default): at once (e.g. 24h, 7d)",
    });
}

/** restic's keep rules, the size cap and the time zone they count in: etcd-gc's own flags. */
export function keepRuleOptions<T>(y: Argv<T>) {
  return y
    .option('keep-last', { type: 'number', describe: 'Keep the newest N full snapshots' })
    .option('keep-hourly', {
      type: 'number',
      describe: 'Keep the newest full of each of the newest N hours that hold one',
    })
    .option('keep-daily', {
      type: 'number',
      describe: 'Keep the newest full of each of the newest N days that hold one',
    })
    .option('keep-weekly', {
      type: 'number',
      describe: 'Keep the newest full of each of the newest N ISO weeks that hold one',
    })
    .option('keep-monthly', {
      type: 'number',
      describe: 'Keep the newest full of each of the newest N months that hold one',
    })
    .option('keep-within', {
      type: 'string',
      describe: 'Keep every full taken within this time before the newest full (e.g. 36h, 14d)',
    })
    .option('max-total-size', {
      type: 'string',
      describe:
        'Delete the oldest kept snapshots until the rest fits in this many bytes (e.g. 50Gi); never the newest restorable chain',
    })
    .option('time-zone', {
      type: 'string',
      default: process.env.TZ || 'UTC',
      describe: 'The time zone whose hours, days, weeks and months the keep rules count (an IANA name)',
    });
}

/** The parsed flags, as the two option builders declare them; keep rules are absent in the sidecar. */
export interface RetentionArgs {
  'garbage-collection-policy'?: (typeof EBR_POLICIES)[number];
  'max-backups': number;
  'delta-snapshot-retention-period': string;
  'keep-last'?: number;
  'keep-hourly'?: number;
  'keep-daily'?: number;
  'keep-weekly'?: number;
  'keep-monthly'?: number;
  'keep-within'?: string;
  'max-total-size'?: string;
  'time-zone'?: string;
}

/**
 * The flags checked together as a policy; every misuse is a UsageError (exit 2) before any work. A run
 * with no policy at all is refused rather than given a default one: deleting is not a default.
 */
export function retentionPolicy(args: RetentionArgs, options: { chunkMaxAgeMs: number }): RetentionPolicy {
  const count = (flag: keyof RetentionArgs & string): number | undefined => {
    const value = args[flag];
    if (value === undefined) return undefined;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
      throw new UsageError(`${flagGiven(args, flag, value)} must be a whole number, 0 or more`);
    }
    return value;
  };
  // A rule of 0 keeps nothing: given alone it would delete all but the newest chain, which is never a default.
  const keepsNothing = (flag: string, fix: string) =>
    new UsageError(
      `${flagGiven(args, flag, args[flag as keyof RetentionArgs])} keeps nothing: ${fix}, or leave the flag out`,
    );
  const rule = (flag: keyof RetentionArgs & `keep-${string}`): number | undefined => {
    const value = count(flag);
    if (value === 0) throw keepsNothing(flag, 'give 1 or more');
    return value;
  };
  const withinMs = args['keep-within'] === undefined ? undefined : parseDuration(args['keep-within'], 'keep-within');
  if (withinMs === 0) throw keepsNothing('keep-within', 'give a time above zero (e.g. 36h)');
  const keep: KeepRules = {
    last: rule('keep-last'),
    hourly: rule('keep-hourly'),
    daily: rule('keep-daily'),
    weekly: rule('keep-weekly'),
    monthly: rule('keep-monthly'),
    withinMs,
  };
  for (const key of Object.keys(keep) as (keyof KeepRules)[]) if (keep[key] === undefined) delete keep[key];
  let ebr: EbrPolicy | undefined;
  if (args['garbage-collection-policy'] === 'LimitBased') {
    const maxBackups = count('max-backups');
    if (!maxBackups) {
      throw new UsageError('--max-backups must be 1 or more with --garbage-collection-policy LimitBased, as in ebr');
    }
    ebr = { policy: 'LimitBased', maxBackups };
  } else if (args['garbage-collection-policy'] === 'Exponential') {
    ebr = { policy: 'Exponential' };
  }
  if (!ebr && !hasKeepRules(keep) && args['max-total-size'] !== undefined) {
    throw new UsageError(
      `${flagGiven(args, 'max-total-size', args['max-total-size'])} alone is no retention policy: the cap applies to what a policy keeps. Give it with --garbage-collection-policy Exponential|LimitBased or keep rules, e.g. --keep-daily 30 --max-total-size ${args['max-total-size']}`,
    );
  }
  if (!ebr && !hasKeepRules(keep)) {
    throw new UsageError(
      'no retention policy: give --garbage-collection-policy Exponential|LimitBased, or keep rules (--keep-last, --keep-hourly, --keep-daily, --keep-weekly, --keep-monthly, --keep-within)',
    );
  }
  const maxTotalSize =
    args['max-total-size'] === undefined ? undefined : parseByteSize(args['max-total-size'], 'max-total-size');
  if (maxTotalSize === 0) throw new UsageError('--max-total-size must be more than 0');
  return {
    ebr,
    keep,
    deltaRetentionMs: parseDuration(args['delta-snapshot-retention-period'], 'delta-snapshot-retention-period'),
    ...(maxTotalSize !== undefined ? { maxTotalSize } : {}),
    chunkMaxAgeMs: options.chunkMaxAgeMs,
    calendar: new Calendar(args['time-zone'] ?? 'UTC'),
  };
}
