import { join } from 'node:path';
import { checkLocalDir } from '@etcd-steward/core/cli';
import { parseByteSize, parseDuration, requirePositive as positive, UsageError } from '@etcd-steward/core/common';
import { COMPRESSION_POLICIES, type CompressionPolicy } from '@etcd-steward/core/format';
import type { SidecarPart } from '../sidecar-part.js';
import { FullSchedule } from './full-schedule.js';
import { clearScratchDir, scratchDir } from './scratch-dir.js';

export interface SnapshottingArgs {
  snapshotter: boolean;
  compression: CompressionPolicy;
  schedule: string;
  'delta-snapshot-period': string;
  'delta-snapshot-memory-limit': string;
  'delta-upload-timeout': string;
  'spool-dir': string;
  'spool-max-bytes': string;
  'temp-dir'?: string;
  'final-snapshot': boolean;
}

/** How long shutdown waits for the watch to deliver etcd's last revisions before the last delta. */
const CATCH_UP_MS = 10_000;
/** etcd steps a leader down after an election timeout (1 s by default) without a quorum; a margin on top. */
const LEADER_STEP_DOWN_MS = 2_000;

/**
 * Full snapshots on a schedule and deltas from a watch, by the leader's sidecar, through the spool. (Every part
 * loads its components when it is built: `save` and `list` load the flags only.)
 */
export const snapshottingPart: SidecarPart<SnapshottingArgs> = {
  name: 'snapshotting',
  heading: 'Snapshots',
  options: (y) =>
    y
      .option('snapshotter', {
        type: 'boolean',
        default: true,
        describe: 'Take snapshots (--no-snapshotter: serve the HTTP API and metrics only)',
      })
      .option('compression', {
        choices: COMPRESSION_POLICIES,
        default: 'zstd' as CompressionPolicy,
        describe: 'zstd is fastest; gzip, zlib and none are readable by etcd-backup-restore too',
      })
      .option('schedule', {
        alias: 's',
        type: 'string',
        default: '0 */1 * * *',
        describe: 'Cron schedule of full snapshots (5 fields, or 6 with seconds first), in local time',
      })
      .option('delta-snapshot-period', {
        type: 'string',
        default: '20s',
        describe: 'How often the watched changes are written as a delta snapshot; 0 switches deltas off',
      })
      .option('delta-snapshot-memory-limit', {
        type: 'string',
        default: '10485760',
        describe: 'Write a delta early once the watched changes reach this many bytes (e.g. 10Mi)',
      })
      .option('delta-upload-timeout', {
        type: 'string',
        default: '30s',
        describe: 'An upload of one delta gives up after this (it stays in the spool and is retried)',
      })
      .option('spool-dir', {
        type: 'string',
        default: '/var/lib/etcd-snapshot/spool',
        describe:
          'Local durable queue of deltas not yet in the store, and of the full snapshot that starts their chain when the store is down at start (use a volume that survives restarts)',
      })
      .option('spool-max-bytes', {
        type: 'string',
        default: '1Gi',
        describe: 'When the spool holds this much, the sidecar stops reading etcd until uploads make room',
      })
      .option('temp-dir', {
        type: 'string',
        describe:
          'Scratch space for full snapshots on their way to the store; the sidecar uses (and clears) only a folder of its own in it [default: <spool-dir>/tmp]',
      })
      .option('final-snapshot', {
        type: 'boolean',
        default: false,
        describe: 'Take a final full snapshot (named .final, as ebr) on SIGTERM',
      }),

  async configure(args, base) {
    if (!args.snapshotter) return undefined;
    const deltaUploadTimeoutMs = positive(
      parseDuration(args['delta-upload-timeout'], 'delta-upload-timeout'),
      'delta-upload-timeout',
    );
    const deltaPeriodMs = parseDuration(args['delta-snapshot-period'], 'delta-snapshot-period');
    if (deltaPeriodMs > 0 && deltaPeriodMs < 1_000) {
      throw new UsageError(
        '--delta-snapshot-period must be at least 1s (or 0 to switch delta snapshots off), as in ebr',
      );
    }
    const memoryLimit = positive(
      parseByteSize(args['delta-snapshot-memory-limit'], 'delta-snapshot-memory-limit'),
      'delta-snapshot-memory-limit',
    );
    const spoolMaxBytes = positive(parseByteSize(args['spool-max-bytes'], 'spool-max-bytes'), 'spool-max-bytes');
    const schedule = new FullSchedule(args.schedule);
    const spoolDir = args['spool-dir'];
    const givenTempDir = args['temp-dir'] ?? join(spoolDir, 'tmp');
    // Before the sidecar touches them (a mkdir under /proc never returns).
    await checkLocalDir(spoolDir, '--spool-dir');
    await checkLocalDir(givenTempDir, '--temp-dir');
    const tempDir = scratchDir(givenTempDir, spoolDir);

    return async (assembly, context) => {
      const [{ Spool }, { registerSettingsMetrics }, { SnapshotterComponent }] = await Promise.all([
        import('./spool/spool.js'),
        import('./settings-metrics.js'),
        import('./snapshotter-component.js'),
      ]);
      const spool = await Spool.open(spoolDir, spoolMaxBytes);
      await clearScratchDir(tempDir);
      registerSettingsMetrics(context.registry, { schedule, deltaPeriodMs, spoolMaxBytes });
      const snapshotter = new SnapshotterComponent(
        {
          connection: base.connection,
          store: assembly.store,
          spool,
          schedule,
          deltaPeriodMs,
          memoryLimit,
          compression: args.compression,
          tempDir,
          deltaUploadTimeoutMs,
          leadership: assembly.leadership,
          finalSnapshot: args['final-snapshot'],
          handoverDelayMs: deltaUploadTimeoutMs + base.reelectionPeriodMs + LEADER_STEP_DOWN_MS,
          catchUpMs: CATCH_UP_MS,
          storePrefix: base.storePrefix,
          incompleteUploadMaxAgeMs: base.incompleteUploadMaxAgeMs,
        },
        context,
      );
      assembly.snapshotter = snapshotter;
      return [snapshotter];
    };
  },
};
