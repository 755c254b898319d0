import { errorMessage, type Logger } from '@etcd-steward/core/common';
import type { AlarmType, EtcdAlarm, EtcdConnection } from '@etcd-steward/core/etcd';
import { recoverFromNoSpace } from '@etcd-steward/core/maintenance';
import { Counter, Gauge } from 'prom-client';
import type { Component, ComponentContext } from '../component.js';
import type { Leadership } from '../leadership/leadership.js';
import type { Serial } from '../serial.js';
import { readAlarms } from './alarm-reads.js';

export interface AlarmsOptions {
  connection: EtcdConnection;
  leadership: Leadership;
  periodMs: number;
  /** etcd's --quota-backend-bytes, and the share of it a NOSPACE recovery must get under before disarming. */
  quotaBytes: number;
  threshold: number;
  defragTimeoutMs: number;
  /** The leader's maintenance queue, shared with scheduled defragmentation. */
  maintenance: Serial;
  /** What the snapshotter's watch still needs from etcd's history: a NOSPACE compaction keeps it. */
  neededRevision?: () => number | undefined;
}

const ALARMS: readonly AlarmType[] = ['NOSPACE', 'CORRUPT'];

/**
 * `--alarm-check-period`: watches etcd's alarms and counts them in the metrics. NOSPACE (a db at its quota; etcd
 * refuses writes) is cleared by the leader's sidecar: compaction, defragmentation, disarm (core's
 * recoverFromNoSpace). CORRUPT is the fence's to act on (corrupt-fence.ts), whatever this period is.
 */
export class AlarmsComponent implements Component {
  readonly name = 'alarms';
  private readonly logger: Logger;
  private readonly recoveries: Counter<'succeeded'>;
  private readonly controller = new AbortController();
  private timer?: NodeJS.Timeout;
  private alarms: EtcdAlarm[] = [];
  private recovering?: Promise<unknown>;

  constructor(
    private readonly options: AlarmsOptions,
    context: ComponentContext,
  ) {
    this.logger = context.logger;
    const registers = [context.registry];
    const current = () => this.alarms;
    new Gauge({
      name: 'etcd_snapshot_alarms',
      help: 'Members with the alarm raised (NOSPACE, CORRUPT), as the last check found them.',
      labelNames: ['alarm'],
      registers,
      collect() {
        for (const alarm of ALARMS) this.set({ alarm }, current().filter((a) => a.alarm === alarm).length);
      },
    });
    this.recoveries = new Counter({
      name: 'etcd_snapshot_nospace_recoveries_total',
      help: 'NOSPACE recoveries (compact, defragment, disarm) by this sidecar; succeeded="false": the alarm stayed.',
      labelNames: ['succeeded'],
      registers,
    });
    // Both series from the start: a series that first appears at 1 shows no increase() to an alert.
    for (const succeeded of ['true', 'false']) this.recoveries.inc({ succeeded }, 0);
  }

  async start(): Promise<void> {
    const tick = async () => {
      await this.check();
      if (!this.controller.signal.aborted) this.timer = setTimeout(tick, this.options.periodMs);
    };
    this.timer = setTimeout(tick, 0);
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.controller.abort(new Error('the sidecar stops'));
    await this.recovering;
  }

  private async check(): Promise<void> {
    const alarms = await readAlarms(this.options.connection, this.logger);
    if (!alarms) return;
    this.alarms = alarms;
    const nospace = this.alarms.filter((a) => a.alarm === 'NOSPACE');
    if (nospace.length === 0 || this.recovering || this.options.leadership.role !== 'leader') return;
    this.logger.warn('NOSPACE alarm: etcd refuses writes; recovering', { members: nospace.map((a) => a.memberId) });
    this.recovering = this.options.maintenance
      .run(() => this.recover(nospace))
      .finally(() => {
        this.recovering = undefined;
      });
  }

  private async recover(alarms: EtcdAlarm[]): Promise<void> {
    try {
      const result = await recoverFromNoSpace(this.options.connection, alarms, {
        quotaBytes: this.options.quotaBytes,
        threshold: this.options.threshold,
        defragTimeoutMs: this.options.defragTimeoutMs,
        logger: this.logger,
        signal: this.controller.signal,
        oldestNeededRevision: this.options.neededRevision,
      });
      this.recoveries.inc({ succeeded: String(result.disarmed) });
    } catch (err) {
      if (this.controller.signal.aborted) return;
      this.recoveries.inc({ succeeded: 'false' });
      this.logger.warn('NOSPACE recovery failed; the next check tries again', { reason: errorMessage(err) });
    }
  }
}
