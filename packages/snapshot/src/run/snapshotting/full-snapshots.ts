import { setTimeout as sleep } from 'node:timers/promises';
import { type SavedFullSnapshot, takeFullSnapshot } from '@etcd-steward/core/backup';
import { Backoff, errorMessage, type Logger } from '@etcd-steward/core/common';
import type { EtcdConnection, WatchCompactedError } from '@etcd-steward/core/etcd';
import type { CompressionPolicy, SnapshotRef } from '@etcd-steward/core/format';
import { isStoreNotWritable, type SnapStore } from '@etcd-steward/core/store';
import type { Serial } from '../serial.js';
import type { FullSchedule } from './full-schedule.js';
import { SingleFlight } from './single-flight.js';
import type { SnapshotMetrics } from './snapshot-metrics.js';

/**
 * Outlives a term. `lastFullFailed`: a failed full snapshot makes the next term start with one (ebr's
 * PrevFullSnapshotSucceeded). `fullRequired`: a full snapshot is owed (due at start-up, failed, or the store
 * lost its base) and none has been stored since. `fullTooLargeToSpool`: a term that started while the store did not
 * answer could not spool its full snapshot (--spool-max-bytes); the next ones do not take it again in vain.
 * `storeNotWritable`: the last full snapshot failed because the store refused the write (read-only, no permission);
 * the store counts as unreachable for writing until a full snapshot is stored.
 */
export interface FullState {
  lastFullFailed: boolean;
  fullRequired: boolean;
  fullTooLargeToSpool: boolean;
  storeNotWritable: boolean;
}

export interface FullSnapshotsOptions {
  /** This sidecar's own member: full snapshots read from it. */
  connection: EtcdConnection;
  /** Written to only while this sidecar leads (a FencedStore). */
  store: SnapStore;
  schedule: FullSchedule;
  compression: CompressionPolicy;
  tempDir: string;
  state: FullState;
  /** The term's queue of store writes: each full snapshot runs in it. */
  serial: Serial;
  metrics: SnapshotMetrics;
  logger: Logger;
  /** The term's. */
  signal: AbortSignal;
  /** Uploads what the spool holds now (not what comes while it runs). */
  drainSpool(): Promise<void>;
  /** A full snapshot at `revision` is in the store; `restart`: the deltas cannot go on through it (etcd compacted). */
  coverThrough(revision: number, restart: boolean): Promise<void>;
  /** A full snapshot is in the store now. */
  onStored(ref: SnapshotRef): void;
  /** The revision the chain of deltas has reached (DeltaWriter.position). */
  chainPosition(): number;
}

const MAX_TIMER_MS = 2 ** 31 - 1;
const FULL_RETRY_MS = 10_000;
const MAX_FULL_RETRY_MS = 300_000;

/**
 * The term's full snapshots: on the schedule, on request (the HTTP API), at once when the chain lost its base (etcd
 * compacted the revisions the next delta needs, or the store lost its full snapshots), and the final one on
 * shutdown. A failed one is owed (unhealthy, `etcdbr_snapshot_required{kind="Full"}` 1) and retried with backoff
 * until one is stored, whatever asked for it: a request is not answered by the next scheduled time, which may be an
 * hour or a day away. (After a compaction the watch asks again itself, after the wait, as it meets the compacted
 * revision again.)
 */
export class FullSnapshots {
  /** Requested full snapshots, by `final`: requests that come while one is queued or running share it. */
  private readonly requestedFull = new SingleFlight<boolean, SavedFullSnapshot>();
  private fullTimer?: NodeJS.Timeout;
  private readonly fullBackoff = new Backoff({ baseDelayMs: FULL_RETRY_MS, maxDelayMs: MAX_FULL_RETRY_MS });
  private readonly logger: Logger;
  private stopped = false;

  constructor(private readonly options: FullSnapshotsOptions) {
    this.logger = options.logger;
  }

  /** Arms the timer for the schedule's next time. */
  armNext(): void {
    this.armFullTimer(this.options.schedule.next(new Date()).getTime());
  }

  /** No scheduled full snapshot starts from now on (shutdown takes its final one itself). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.fullTimer);
  }

  /**
   * An out-of-schedule full snapshot (HTTP API); the schedule goes on from now. A request that comes while
   * another one's snapshot is queued or running gets that snapshot.
   */
  trigger(final: boolean): Promise<SavedFullSnapshot> {
    return this.requestedFull.run(final, async () => {
      let saved: SavedFullSnapshot;
      try {
        saved = await this.options.serial.run(() => this.take(final));
      } catch (err) {
        // The caller hears of the failure; the snapshot stays owed and is retried like a scheduled one.
        if (!this.options.signal.aborted) this.retryLater(err);
        throw err;
      }
      this.fullBackoff.reset();
      this.armNext();
      return saved;
    });
  }

  /** The store lost its full snapshots under the sidecar: a new chain starts with one, now. */
  baseLost(): void {
    this.options.state.fullRequired = true;
    this.armFullTimer(Date.now());
  }

  async afterCompaction(err: WatchCompactedError): Promise<void> {
    this.options.metrics.compacted.inc();
    this.options.state.fullRequired = true;
    this.logger.error('etcd compacted its history past the revision the next delta needs; taking a full snapshot now', {
      neededRevision: err.fromRevision,
      compactRevision: err.compactRevision,
    });
    try {
      // A full snapshot taken meanwhile (queued before this one) may have started the chain again past it already.
      await this.options.serial.run(async () => {
        if (this.options.chainPosition() < err.fromRevision) await this.take(false, true);
      });
      this.fullBackoff.reset();
    } catch (fullErr) {
      // The watch meets the compacted revision again after this wait, and asks again.
      const retryMs = this.fullBackoff.next();
      this.logger.error('full snapshot after compaction failed; trying again', {
        reason: errorMessage(fullErr),
        retryInSeconds: retryMs / 1000,
      });
      await sleep(retryMs, undefined, { signal: this.options.signal }).catch(() => {});
    }
  }

  /** A full snapshot is in the store: none is owed any more. */
  stored(ref: SnapshotRef): void {
    this.options.state.lastFullFailed = false;
    this.options.state.fullRequired = false;
    this.options.state.storeNotWritable = false;
    this.options.onStored(ref);
  }

  /**
   * Takes a full snapshot into the store. Runs in the term's store queue. `restart`: the chain of deltas broke off
   * (etcd compacted what it needs), and starts again after this snapshot.
   */
  async take(final: boolean, restart = false): Promise<SavedFullSnapshot> {
    this.options.signal.throwIfAborted();
    try {
      // Keeps the chain before this full snapshot whole, when the store allows. Only what is spooled now: deltas
      // keep coming while it runs, and chasing them could hold the full snapshot back for good.
      await this.options.drainSpool();
    } catch {
      // the store is failing: the full snapshot's own upload will say so
    }
    const started = Date.now();
    const { metrics, state } = this.options;
    let saved: SavedFullSnapshot;
    try {
      saved = await takeFullSnapshot({
        connection: this.options.connection,
        store: this.options.store,
        compression: this.options.compression,
        tempDir: this.options.tempDir,
        final,
        logger: this.logger,
        signal: this.options.signal,
        parallel: false, // the sidecar's memory counts for longer than a full snapshot's speed
      });
    } catch (err) {
      if (!this.options.signal.aborted) {
        state.lastFullFailed = true;
        state.fullRequired = true;
        if (isStoreNotWritable(err)) state.storeNotWritable = true;
        metrics.failed('Full', (Date.now() - started) / 1000);
        metrics.failures.inc({ error: 'full' });
      }
      throw err;
    }
    this.stored(saved.ref);
    metrics.saved('Full', saved.revision, saved.ref.createdAt, saved.durationMs / 1000, saved.storedSize);
    metrics.latestDeltas.set(0);
    metrics.latestDeltaRevisions.set(0);
    await this.options.coverThrough(saved.revision, restart);
    return saved;
  }

  async scheduledFull(): Promise<void> {
    try {
      await this.options.serial.run(() => this.take(false));
      this.fullBackoff.reset();
      this.armFullTimer(this.options.schedule.next(new Date()).getTime());
    } catch (err) {
      if (this.options.signal.aborted) return;
      this.retryLater(err);
    }
  }

  /** A full snapshot failed: the next try comes after the backoff's wait, not at the schedule's next time. */
  private retryLater(err: unknown): void {
    const retryMs = this.fullBackoff.next();
    this.logger.error('full snapshot failed; trying again', {
      reason: errorMessage(err),
      retryInSeconds: retryMs / 1000,
    });
    this.armFullTimer(Date.now() + retryMs);
  }

  private armFullTimer(at: number): void {
    clearTimeout(this.fullTimer);
    // a store found forked, a full snapshot that ended, while the term stops: not again
    if (this.stopped || this.options.signal.aborted) return;
    const wait = Math.min(Math.max(at - Date.now(), 0), MAX_TIMER_MS);
    // Timers cannot wait longer than ~24.8 days; a monthly schedule re-arms until its time has come.
    this.fullTimer = setTimeout(() => (Date.now() >= at ? void this.scheduledFull() : this.armFullTimer(at)), wait);
  }
}
