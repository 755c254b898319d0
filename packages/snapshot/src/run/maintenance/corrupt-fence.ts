import type { Logger } from '@etcd-steward/core/common';
import type { EtcdConnection } from '@etcd-steward/core/etcd';
import type { Component, ComponentContext } from '../component.js';
import type { Leadership } from '../leadership/leadership.js';
import { readAlarms } from './alarm-reads.js';

export interface CorruptFenceOptions {
  connection: EtcdConnection;
  leadership: Leadership;
  /** How often etcd's alarms are read: the leadership's period, since it decides who may snapshot. */
  periodMs: number;
}

/**
 * No snapshot from a member with a CORRUPT alarm: a corrupt db must not become the backup. The alarm is raised
 * loudly (an error line, /healthz failing) and the leadership suspended, so that this sidecar neither snapshots
 * nor passes requests on to itself, until the alarm is gone. Its own rule, apart from the alarms component:
 * switching NOSPACE recovery off (--alarm-check-period 0) leaves the fence up.
 */
export class CorruptFence implements Component {
  readonly name = 'corrupt-fence';
  private readonly logger: Logger;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private corrupt = false;

  constructor(
    private readonly options: CorruptFenceOptions,
    context: ComponentContext,
  ) {
    this.logger = context.logger;
  }

  async start(): Promise<void> {
    const tick = async () => {
      await this.check();
      if (!this.stopped) this.timer = setTimeout(tick, this.options.periodMs);
    };
    this.timer = setTimeout(tick, 0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  healthy(): boolean {
    return !this.corrupt;
  }

  private async check(): Promise<void> {
    // Unread, the fence stays as it was until etcd answers again.
    const alarms = await readAlarms(this.options.connection, this.logger);
    if (!alarms) return;
    const own = this.options.leadership.status?.memberId;
    const corrupt = alarms.some((a) => a.alarm === 'CORRUPT' && a.memberId === own);
    if (corrupt === this.corrupt) return;
    this.corrupt = corrupt;
    if (corrupt) {
      this.logger.error('CORRUPT alarm on this member: its data differs from the cluster', {
        member: own,
        fix: 'replace the member (remove it, wipe its data dir, add it back) and disarm the alarm (etcdctl alarm disarm)',
      });
      this.options.leadership.suspend('its etcd member has a CORRUPT alarm');
    } else {
      this.logger.info('the CORRUPT alarm on this member is gone');
      this.options.leadership.resume();
    }
  }
}
