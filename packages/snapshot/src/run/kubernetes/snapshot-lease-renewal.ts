import { renewedSnapshotLease, updateObject } from '@etcd-steward/core/kubernetes';
import type { Component } from '../component.js';
import type { SavedSnapshot, Snapshotter } from '../sidecar-part.js';
import type { KubeClient } from './kube-client.js';
import type { KubePublisher } from './kube-publisher.js';

export interface SnapshotLeaseNames {
  full: string;
  delta: string;
}

/**
 * `--enable-snapshot-lease-renewal`: after each snapshot in the store, the full- or delta-snapshot lease holds its
 * last revision (ebr's semantics: the full lease renewed at the time the snapshot was taken, the delta lease at
 * the time it was stored; a lease at a higher revision is left as it is).
 */
export class SnapshotLeaseRenewal implements Component {
  readonly name = 'snapshot-lease-renewal';
  private unsubscribe?: () => void;

  constructor(
    private readonly options: {
      client: KubeClient;
      publisher: KubePublisher;
      snapshots: Snapshotter;
      namespace: string;
      names: SnapshotLeaseNames;
    },
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = this.options.snapshots.onSaved((saved) => this.renew(saved));
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
  }

  private renew(saved: SavedSnapshot): void {
    const { client, namespace, names } = this.options;
    const full = saved.kind === 'Full';
    const name = full ? names.full : names.delta;
    const snapshot = {
      lastRevision: saved.lastRevision,
      takenAt: full ? new Date(saved.createdAt * 1000) : new Date(),
    };
    const api = client.lease(name, namespace);
    this.options.publisher.publish(full ? 'full-snapshot-lease' : 'delta-snapshot-lease', async (onConflict) => {
      await updateObject(api, (current) => renewedSnapshotLease(current, { name, namespace }, snapshot), onConflict);
    });
  }
}
