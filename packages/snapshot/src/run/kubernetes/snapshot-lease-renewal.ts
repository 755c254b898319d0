import { renewedDeltaSnapshotLease, renewedSnapshotLease, updateObject } from '@etcd-steward/core/kubernetes';
import type { Component } from '../component.js';
import type { SavedSnapshot, Snapshotter } from '../sidecar-part.js';
import type { KubeClient } from './kube-client.js';
import type { KubePublisher } from './kube-publisher.js';

export interface SnapshotLeaseNames {
  full: string;
  delta: string;
}

/**
 * `--enable-snapshot-lease-renewal`, with ebr's semantics: after each full snapshot in the store, the full-snapshot
 * lease holds its last revision and the time it was taken (a lease at a higher revision is left as it is); the
 * delta-snapshot lease is renewed after every delta period while this sidecar takes the snapshots, with the newest
 * delta's last revision, also when no delta was needed: druid's BackupReady condition reads its renew time, and an
 * idle cluster is backed up all the same.
 */
export class SnapshotLeaseRenewal implements Component {
  readonly name = 'snapshot-lease-renewal';
  private unsubscribe?: () => void;
  private timer?: NodeJS.Timeout;
  /** The newest delta stored since start (before it, the lease keeps what it holds). */
  private lastDelta?: number;
  private lastDeltaRenewal = 0;

  constructor(
    private readonly options: {
      client: KubeClient;
      publisher: KubePublisher;
      snapshots: Snapshotter;
      namespace: string;
      names: SnapshotLeaseNames;
      /** `--delta-snapshot-period`; 0: deltas are off, and so is the renewal between them. */
      deltaPeriodMs: number;
    },
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = this.options.snapshots.onSaved((saved) => this.saved(saved));
    const period = this.options.deltaPeriodMs;
    if (period > 0) {
      this.timer = setInterval(() => {
        // A delta stored within the period renewed the lease already.
        if (this.options.snapshots.leading && Date.now() - this.lastDeltaRenewal >= period / 2) this.renewDelta();
      }, period);
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.unsubscribe?.();
  }

  private saved(saved: SavedSnapshot): void {
    if (saved.kind === 'Incr') {
      this.lastDelta = Math.max(this.lastDelta ?? 0, saved.lastRevision);
      this.renewDelta();
      return;
    }
    const { client, namespace, names } = this.options;
    const snapshot = { lastRevision: saved.lastRevision, takenAt: new Date(saved.createdAt * 1000) };
    const api = client.lease(names.full, namespace);
    this.options.publisher.publish('full-snapshot-lease', async (onConflict) => {
      await updateObject(
        api,
        (current) => renewedSnapshotLease(current, { name: names.full, namespace }, snapshot),
        onConflict,
      );
    });
  }

  private renewDelta(): void {
    const { client, namespace, names } = this.options;
    const now = new Date();
    this.lastDeltaRenewal = now.getTime();
    const lastRevision = this.lastDelta;
    const api = client.lease(names.delta, namespace);
    this.options.publisher.publish('delta-snapshot-lease', async (onConflict) => {
      await updateObject(
        api,
        (current) => renewedDeltaSnapshotLease(current, { name: names.delta, namespace }, lastRevision, now),
        onConflict,
      );
    });
  }
}
