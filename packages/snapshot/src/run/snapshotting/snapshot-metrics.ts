import type { SnapshotKind } from '@etcd-steward/core/format';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { SavedSnapshot } from '../sidecar-part.js';

/** What the metrics read live at each scrape. */
export interface SnapshotterGauges {
  spoolDeltas(): number;
  spoolBytes(): number;
  /** Delta JSON in the open delta (on disk: the events are not held in memory). */
  bufferedBytes(): number;
  /** etcd's revision minus the newest revision the watch delivered; undefined while not watching. */
  watchLagRevisions(): number | undefined;
  fullRequired(): boolean;
  deltaRequired(): boolean;
  /** false while the store cannot be reached (the term cannot start, or uploads fail). */
  storeReachable(): boolean;
  /** true while the sidecar refuses to write: the store holds a history etcd does not continue. */
  historyRefused(): boolean;
}

/**
 * The snapshotter's metrics. Names under `etcdbr_` are ebr's, with ebr's labels (kind = Full | Incr), so
 * existing dashboards and alerts keep working; `etcd_snapshot_` ones are ours.
 */
export class SnapshotMetrics {
  readonly latestRevision: Gauge<'kind'>;
  readonly latestTimestamp: Gauge<'kind'>;
  readonly duration: Histogram<'kind' | 'succeeded'>;
  readonly failures: Counter<'error'>;
  readonly latestDeltas: Gauge;
  readonly latestDeltaRevisions: Gauge;
  readonly size: Histogram<'kind'>;
  readonly deltaLag: Histogram;
  readonly compacted: Counter;
  readonly resyncs: Counter;
  readonly historyForks: Counter;
  private readonly listeners = new Set<(saved: SavedSnapshot) => void>();

  constructor(registry: Registry, gauges: () => SnapshotterGauges | undefined) {
    const registers = [registry];
    this.latestRevision = new Gauge({
      name: 'etcdbr_snapshot_latest_revision',
      help: 'Revision number of latest snapshot taken.',
      labelNames: ['kind'],
      registers,
    });
    this.latestTimestamp = new Gauge({
      name: 'etcdbr_snapshot_latest_timestamp',
      help: 'Timestamp of latest snapshot taken.',
      labelNames: ['kind'],
      registers,
    });
    new Gauge({
      name: 'etcdbr_snapshot_required',
      help: 'Indicates whether a snapshot is required to be taken.',
      labelNames: ['kind'],
      registers,
      collect() {
        const g = gauges();
        this.set({ kind: 'Full' }, g?.fullRequired() ? 1 : 0);
        this.set({ kind: 'Incr' }, g?.deltaRequired() ? 1 : 0);
      },
    });
    this.duration = new Histogram({
      name: 'etcdbr_snapshot_duration_seconds',
      help: 'Total latency distribution of saving snapshot to object store.',
      labelNames: ['kind', 'succeeded'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
      registers,
    });
    this.failures = new Counter({
      name: 'etcdbr_snapshotter_failure',
      help: 'Total number of snapshotter errors, by what failed: store, etcd (the watch), full, spool, chain.',
      labelNames: ['error'],
      registers,
    });
    this.latestDeltas = new Gauge({
      name: 'etcdbr_snapstore_latest_deltas_total',
      help: 'Total number of delta snapshots taken since the latest full snapshot.',
      registers,
    });
    this.latestDeltaRevisions = new Gauge({
      name: 'etcdbr_snapstore_latest_deltas_revisions_total',
      help: 'Total number of revisions stored in delta snapshots taken since the latest full snapshot.',
      registers,
    });
    this.size = new Histogram({
      name: 'etcd_snapshot_size_bytes',
      help: 'Size of the stored snapshot objects (after compression).',
      labelNames: ['kind'],
      buckets: [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10],
      registers,
    });
    this.deltaLag = new Histogram({
      name: 'etcd_snapshot_delta_lag_seconds',
      help: 'From when the sidecar saw the oldest event of a delta to when that delta was in the store.',
      buckets: [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 900, 3600],
      registers,
    });
    this.compacted = new Counter({
      name: 'etcd_snapshot_watch_compacted_total',
      help: 'Times etcd had compacted past the revision the watch needed, so a full snapshot was taken at once.',
      registers,
    });
    this.resyncs = new Counter({
      name: 'etcd_snapshot_resyncs_total',
      help: "Times the snapshotter restarted its chain from the store's newest snapshot (the store changed under it).",
      registers,
    });
    this.historyForks = new Counter({
      name: 'etcd_snapshot_history_forks_total',
      help: "Times etcd's history left the store's (a restore to an earlier revision): the store's later snapshots were set aside under forks/ and a full snapshot taken.",
      registers,
    });
    const live = (name: string, help: string, read: (g: SnapshotterGauges) => number | undefined) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const g = gauges();
          const value = g ? read(g) : undefined;
          if (value === undefined) this.reset();
          else this.set(value);
        },
      });
    live(
      'etcd_snapshot_store_reachable',
      '1 while the store answers, 0 while it cannot be reached or refuses writes (read-only, no permission).',
      (g) => (g.storeReachable() ? 1 : 0),
    );
    live(
      'etcd_snapshot_history_refused',
      "1 while the sidecar writes nothing because the store holds a history etcd does not continue (another cluster's, or a new cluster's store).",
      (g) => (g.historyRefused() ? 1 : 0),
    );
    live(
      'etcd_snapshot_spool_deltas',
      'Snapshots in the local spool, not yet in the store: deltas, and a full snapshot taken while the store was down at start.',
      (g) => g.spoolDeltas(),
    );
    live('etcd_snapshot_spool_bytes', 'Bytes of the snapshots in the local spool.', (g) => g.spoolBytes());
    live(
      'etcd_snapshot_buffered_bytes',
      'Watched events written to the open delta in the spool, not yet a finished delta (bytes of delta JSON).',
      (g) => g.bufferedBytes(),
    );
    live('etcd_snapshot_watch_lag_revisions', "etcd's revision minus the newest revision the watch delivered.", (g) =>
      g.watchLagRevisions(),
    );
  }

  saved(kind: SnapshotKind, lastRevision: number, createdAt: number, seconds: number, bytes: number): void {
    this.latestRevision.set({ kind }, lastRevision);
    this.latestTimestamp.set({ kind }, createdAt);
    this.duration.observe({ kind, succeeded: 'true' }, seconds);
    this.size.observe({ kind }, bytes);
    for (const listener of this.listeners) listener({ kind, lastRevision, createdAt });
  }

  /** Every snapshot stored from now on (the snapshot leases follow them); listeners must not throw. */
  onSaved(listener: (saved: SavedSnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  failed(kind: SnapshotKind, seconds: number): void {
    this.duration.observe({ kind, succeeded: 'false' }, seconds);
  }
}
