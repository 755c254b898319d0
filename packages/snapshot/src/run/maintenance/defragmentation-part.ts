import { parseByteSize, parseDuration, requirePositive } from '@etcd-steward/core/common';
import { CronSchedule } from '../cron-schedule.js';
import type { SidecarPart } from '../sidecar-part.js';

export interface DefragmentationArgs {
  defragmentation: boolean;
  'defragmentation-schedule': string;
  'defrag-min-reclaim': string;
  'etcd-defrag-timeout': string;
  'full-snapshot-after-defragmentation': boolean;
}

/** Scheduled defragmentation of every member, from the leader's sidecar (docs/maintenance.md §3). */
export const defragmentationPart: SidecarPart<DefragmentationArgs> = {
  name: 'defragmentation',
  heading: 'Defragmentation',
  options: (y) =>
    y
      .option('defragmentation', {
        type: 'boolean',
        default: true,
        describe:
          "Defragment every member on --defragmentation-schedule, from the leader's sidecar, one member at a time (--no-defragmentation: never; docs/maintenance.md §3)",
      })
      .option('defragmentation-schedule', {
        type: 'string',
        default: '0 0 */3 * *',
        describe: 'Cron schedule of defragmentation (5 fields, or 6 with seconds first), in local time',
      })
      .option('defrag-min-reclaim', {
        type: 'string',
        default: '16Mi',
        describe: "Skip a member whose db has less than this to give back (etcd's dbSize minus dbSizeInUse)",
      })
      .option('etcd-defrag-timeout', {
        type: 'string',
        default: '8m',
        describe:
          "The longest one member's defragmentation may take (a NOSPACE recovery's too); the run stops there and counts a failure",
      })
      .option('full-snapshot-after-defragmentation', {
        type: 'boolean',
        default: false,
        describe: 'Take a full snapshot after a defragmentation that defragmented a member',
      }),

  configure(args, base) {
    const schedule = new CronSchedule(args['defragmentation-schedule'], 'defragmentation-schedule');
    const minReclaimBytes = parseByteSize(args['defrag-min-reclaim'], 'defrag-min-reclaim');
    const timeoutMs = requirePositive(
      parseDuration(args['etcd-defrag-timeout'], 'etcd-defrag-timeout'),
      'etcd-defrag-timeout',
    );
    if (!args.defragmentation) return undefined;
    return async (assembly, context) => {
      const { DefragmentationComponent } = await import('./defragmentation-component.js');
      const { snapshotter, leadership, maintenance } = assembly;
      const afterRun = async () => {
        if (!snapshotter?.leading) return;
        const saved = await snapshotter.full(false);
        context.logger.info('full snapshot after defragmentation', { snapshot: saved.ref.name });
      };
      return [
        new DefragmentationComponent(
          {
            connection: base.connection,
            leadership,
            maintenance,
            schedule,
            minReclaimBytes,
            timeoutMs,
            afterRun: args['full-snapshot-after-defragmentation'] ? afterRun : undefined,
          },
          context,
        ),
      ];
    };
  },
};
