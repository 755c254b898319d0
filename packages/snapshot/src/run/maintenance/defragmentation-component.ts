import { errorMessage, type Logger } from '@etcd-steward/core/common';
import type { EtcdConnection } from '@etcd-steward/core/etcd';
import { type MemberDefragmentation, runScheduledDefragmentation } from '@etcd-steward/core/maintenance';
import { Counter, Histogram } from 'prom-client';
import type { Component, ComponentContext } from '../component.js';
import type { CronSchedule } from '../cron-schedule.js';
import type { Leadership } from '../leadership/leadership.js';
import type { Serial } from '../serial.js';

export interface DefragmentationComponentOptions {
  connection: EtcdConnection;
  leadership: Leadership;
  schedule: CronSchedule;
  minReclaimBytes: number;
  /** One member's defragmentation at most (ebr's --etcd-defrag-timeout). */
  timeoutMs: number;
  /** The leader's own maintenance queue: a NOSPACE recovery and a scheduled run never overlap here. */
  maintenance: Serial;
  /** Called after a run that defragmented a member (a full snapshot, when configured). */
  afterRun?: () => Promise<void>;
}

/** The lock's lease: a sidecar that dies frees the lock this long after. */
const LOCK_TTL_SECONDS = 10;
/** Another holder still at work after this: this sidecar's run is given up (the other is doing it). */
const LOCK_WAIT_MS = 30_000;

/**
 * `--defragmentation-schedule`: on each due time the leader's sidecar defragments every member of the cluster,
 * one at a time, followers first and its own member last (core's runScheduledDefragmentation), under the etcd
 * lock and once for the due time; members with less than --defrag-min-reclaim to give back are skipped.
 */
export class DefragmentationComponent implements Component {
  readonly name = 'defragmentation';
  private readonly logger: Logger;
  private readonly duration: Histogram<'succeeded'>;
  private readonly reclaimed: Counter;
  private readonly failures: Counter;
  private readonly controller = new AbortController();
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;

  constructor(
    private readonly options: DefragmentationComponentOptions,
    context: ComponentContext,
  ) {
    this.logger = context.logger;
    const registers = [context.registry];
    this.duration = new Histogram({
      name: 'etcdbr_defragmentation_duration_seconds',
      help: 'Total latency distribution of defragmentation of each etcd cluster member.',
      labelNames: ['succeeded'],
      buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
      registers,
    });
    this.reclaimed = new Counter({
      name: 'etcd_snapshot_defragmentation_reclaimed_bytes_total',
      help: 'Bytes the defragmentations gave back (db size before minus after, summed over members).',
      registers,
    });
    this.failures = new Counter({
      name: 'etcd_snapshot_defragmentation_failures_total',
      help: 'Scheduled defragmentation runs that failed (a member unhealthy, a timeout, the lock lost).',
      registers,
    });
  }

  async start(): Promise<void> {
    this.arm();
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.controller.abort(new Error('the sidecar stops'));
    await this.running;
  }

  private arm(): void {
    if (this.controller.signal.aborted) return;
    const due = this.options.schedule.next(new Date());
    this.timer = setTimeout(
      () => {
        this.arm();
        if (this.options.leadership.role !== 'leader' || this.running) return;
        this.running = this.options.maintenance
          .run(() => this.runOnce(due))
          .finally(() => {
            this.running = undefined;
          });
      },
      Math.max(0, due.getTime() - Date.now()),
    );
  }

  /** One due run; what went wrong is logged and counted, never thrown: the next due time tries again. */
  private async runOnce(due: Date): Promise<void> {
    const { logger } = this;
    logger.info('defragmentation due', { due: due.toISOString() });
    try {
      const result = await runScheduledDefragmentation(this.options.connection, due, {
        minReclaimBytes: this.options.minReclaimBytes,
        timeoutMs: this.options.timeoutMs,
        logger,
        signal: this.controller.signal,
        lockTtlSeconds: LOCK_TTL_SECONDS,
        lockWaitMs: LOCK_WAIT_MS,
      });
      if (!result.ran) {
        logger.info('defragmentation skipped', { due: due.toISOString(), reason: result.reason });
        return;
      }
      this.observe(result.members);
      const done = result.members.filter((m) => m.dbBytesAfter !== undefined);
      logger.info('defragmentation done', {
        due: due.toISOString(),
        defragmented: done.length,
        skipped: result.members.length - done.length,
        reclaimedBytes: done.reduce((sum, m) => sum + m.dbBytesBefore - (m.dbBytesAfter ?? 0), 0),
      });
      if (done.length > 0) await this.options.afterRun?.();
    } catch (err) {
      if (this.controller.signal.aborted) return;
      this.failures.inc();
      logger.warn('defragmentation failed; the next due time tries again', { reason: errorMessage(err) });
    }
  }

  private observe(members: readonly MemberDefragmentation[]): void {
    for (const m of members) {
      if (m.startedAt === undefined || m.endedAt === undefined || m.dbBytesAfter === undefined) continue;
      this.duration.observe({ succeeded: 'true' }, (m.endedAt - m.startedAt) / 1000);
      this.reclaimed.inc(Math.max(0, m.dbBytesBefore - m.dbBytesAfter));
    }
  }
}
