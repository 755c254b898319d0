import { errorMessage, type Logger, OperationError } from '@etcd-steward/core/common';
import { type EtcdConnection, type EtcdStatus, memberList, memberStatus } from '@etcd-steward/core/etcd';
import { Counter, Gauge } from 'prom-client';
import type { Component, ComponentContext } from '../component.js';

/** This sidecar is no longer (or not yet) the leader, so it must not write. */
export class NotLeaderError extends OperationError {
  constructor() {
    super("this sidecar's etcd member is not the leader: another sidecar takes the snapshots");
  }
}

/** Whether this sidecar's etcd member leads the cluster; 'unknown' while etcd cannot be asked. */
export type Role = 'leader' | 'follower' | 'unknown';

export interface LeadershipOptions {
  /** This sidecar's own member (one endpoint). */
  connection: EtcdConnection;
  /** How often to ask (ebr's --reelection-period). */
  periodMs: number;
  timeoutMs: number;
}

/**
 * Only one sidecar in a cluster takes snapshots: the one next to etcd's raft leader, as in ebr. This asks the
 * member (maintenance status) every period and tells listeners when the role changes. A sidecar that cannot
 * tell is not the leader, so a sidecar cut off from etcd stops writing instead of racing the new leader.
 *
 * The other components read leadership here and nowhere else: `role` (and `status`, the member's last
 * answer) now, `onChange` for each change of role, `confirm()` to ask etcd at once. A member suspended by
 * `suspend` (its db is CORRUPT) counts as a follower, so that no snapshot is taken from it.
 */
export class Leadership implements Component {
  readonly name = 'leadership';
  role: Role = 'unknown';
  /** The member's last answer, when there was one. */
  status?: EtcdStatus;
  private readonly listeners = new Set<(role: Role) => void>();
  private readonly logger: Logger;
  private readonly gauge: Gauge;
  private readonly leaderChanges: Counter;
  /** Why this member must not lead the snapshots, while it must not. */
  private suspended?: string;
  /** The last leader etcd named ('0', an election under way, is not one). */
  private lastLeader?: string;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private asked = 0;
  private answered = 0;
  /** Whether etcd answered the last check; undefined before the first. Outages are logged once, not per check. */
  private reachable?: boolean;
  /** The last role etcd told; 'unknown' is never one. */
  private known?: Role;

  constructor(
    private readonly options: LeadershipOptions,
    context: ComponentContext,
  ) {
    this.logger = context.logger;
    this.gauge = new Gauge({
      name: 'etcd_snapshot_leader',
      help: "1 while this sidecar's etcd member is the cluster's leader (and so this sidecar takes snapshots)",
      registers: [context.registry],
    });
    this.leaderChanges = new Counter({
      name: 'etcd_snapshot_leader_changes_total',
      help: "Times the cluster's leader changed, as this sidecar's member reported it",
      registers: [context.registry],
    });
  }

  /** From now on this member counts as a follower (its listeners hear so at the next check), saying why. */
  suspend(reason: string): void {
    if (this.suspended === undefined) this.logger.error('snapshots from this member stop', { reason });
    this.suspended = reason;
  }

  /** Why this member must not lead the snapshots, while it must not. */
  get suspension(): string | undefined {
    return this.suspended;
  }

  resume(): void {
    if (this.suspended !== undefined) this.logger.info('snapshots from this member may go on', { was: this.suspended });
    this.suspended = undefined;
  }

  async start(): Promise<void> {
    await this.check();
    const tick = async () => {
      await this.check();
      if (!this.stopped) this.timer = setTimeout(tick, this.options.periodMs);
    };
    this.timer = setTimeout(tick, this.options.periodMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  healthy(): boolean {
    return this.role !== 'unknown';
  }

  onChange(listener: (role: Role) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Asks etcd now: the fence every upload passes, so that a sidecar that lost the lead stops writing at once. */
  async confirm(): Promise<boolean> {
    await this.check();
    return this.role === 'leader';
  }

  /** The leader's client URL, for forwarding requests to its sidecar. */
  async leaderClientUrl(): Promise<string | undefined> {
    const leader = this.status?.leader;
    if (!leader || leader === '0') return undefined;
    const members = await memberList(this.options.connection, { timeoutMs: this.options.timeoutMs });
    return members.find((m) => m.id === leader)?.clientUrls[0];
  }

  async memberCount(): Promise<number> {
    return (await memberList(this.options.connection, { timeoutMs: this.options.timeoutMs })).length;
  }

  private async check(): Promise<void> {
    const asked = ++this.asked;
    let role: Role;
    let status: EtcdStatus | undefined;
    let reason = '';
    try {
      status = await memberStatus(this.options.connection, { timeoutMs: this.options.timeoutMs });
      role = status.leader === status.memberId && this.suspended === undefined ? 'leader' : 'follower';
    } catch (err) {
      role = 'unknown';
      reason = errorMessage(err);
    }
    // Checks overlap (the periodic one and an upload's): an older answer must not undo a newer one.
    if (asked < this.answered) return;
    this.answered = asked;
    if (status && status.leader !== '0') {
      if (this.lastLeader !== undefined && status.leader !== this.lastLeader) this.leaderChanges.inc();
      this.lastLeader = status.leader;
    }
    if (status) this.status = status;
    if (this.stopped) return;
    this.noteReachable(status !== undefined, reason);
    // A moment without an answer is logged as etcd being unreachable, not as a change of leadership.
    if (role !== 'unknown' && role !== this.known) {
      const change =
        role === 'leader'
          ? 'leadership gained: this member leads'
          : this.known === 'leader'
            ? 'leadership lost: this member no longer leads'
            : 'this member follows another leader';
      this.logger.info(change, { from: this.known ?? 'unknown', to: role });
      this.known = role;
    }
    if (role === this.role) return;
    this.role = role;
    this.gauge.set(role === 'leader' ? 1 : 0);
    for (const listener of this.listeners) listener(role);
  }

  private noteReachable(reachable: boolean, reason: string): void {
    if (reachable === this.reachable) return;
    if (!reachable) this.logger.warn('etcd is unreachable; asking again', { reason });
    else if (this.reachable === false) this.logger.info('etcd is reachable again');
    this.reachable = reachable;
  }
}
