import { flagGiven } from '@etcd-steward/core/cli';
import { parseByteSize, parseDuration, requirePositive, UsageError } from '@etcd-steward/core/common';
import type { SidecarPart } from '../sidecar-part.js';

export interface AlarmsArgs {
  'alarm-check-period': string;
  'alarm-quota-bytes': string;
  'alarm-nospace-threshold': number;
  /** defragmentation-part.ts's: a NOSPACE recovery defragments too. */
  'etcd-defrag-timeout': string;
}

/** etcd's alarms watched; NOSPACE cleared by the leader's sidecar (docs/maintenance.md). */
export const alarmsPart: SidecarPart<AlarmsArgs> = {
  name: 'alarms',
  heading: 'Alarms',
  options: (y) =>
    y
      .option('alarm-check-period', {
        type: 'string',
        default: '10s',
        describe:
          "How often to read etcd's alarms: NOSPACE is cleared (compact, defragment, disarm), and the alarms are counted in the metrics; 0: never",
      })
      .option('alarm-quota-bytes', {
        type: 'string',
        default: '2Gi',
        describe: "etcd's --quota-backend-bytes: a NOSPACE alarm is disarmed only once every db is well under it",
      })
      .option('alarm-nospace-threshold', {
        type: 'number',
        default: 0.8,
        describe: 'The share of --alarm-quota-bytes every db must be under before a NOSPACE alarm is disarmed (0-1)',
      }),

  configure(args, base) {
    const periodMs = parseDuration(args['alarm-check-period'], 'alarm-check-period');
    const quotaBytes = requirePositive(
      parseByteSize(args['alarm-quota-bytes'], 'alarm-quota-bytes'),
      'alarm-quota-bytes',
    );
    const threshold = args['alarm-nospace-threshold'];
    if (!(threshold > 0 && threshold < 1)) {
      throw new UsageError(
        `${flagGiven(args, 'alarm-nospace-threshold', threshold)} must be a share of the quota between 0 and 1, e.g. 0.8`,
      );
    }
    const defragTimeoutMs = parseDuration(args['etcd-defrag-timeout'], 'etcd-defrag-timeout');
    if (periodMs <= 0) return undefined;
    return async (assembly, context) => [
      new (await import('./alarms-component.js')).AlarmsComponent(
        {
          connection: base.connection,
          leadership: assembly.leadership,
          maintenance: assembly.maintenance,
          periodMs,
          quotaBytes,
          threshold,
          defragTimeoutMs,
          neededRevision: () => assembly.snapshotter?.neededRevision,
        },
        context,
      ),
    ];
  },
};
