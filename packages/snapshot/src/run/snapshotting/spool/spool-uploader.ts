import { ForeignHistoryError } from '@etcd-steward/core/backup';
import { Backoff, errorMessage, type Logger } from '@etcd-steward/core/common';
import { parseSnapshotName, type SnapshotRef } from '@etcd-steward/core/format';
import type { SnapStore } from '@etcd-steward/core/store';
import type { Serial } from '../../serial.js';
import type { SnapshotMetrics } from '../snapshot-metrics.js';
import { type ChainHeads, spoolFit } from './chain-heads.js';
import { isSpooledFull, type Spool, type SpooledDelta } from './spool.js';
import { spooledMetadata } from './spooled-metadata.js';

export interface SpoolUploaderOptions {
  /** Written to only while this sidecar leads (a FencedStore). */
  store: SnapStore;
  spool: Spool;
  /** The term's queue of store writes: each drain runs in it. */
  serial: Serial;
  /** An old leader's delta upload ends by then, so a new leader that waits this long cannot be overlapped. */
  deltaUploadTimeoutMs: number;
  metrics: SnapshotMetrics;
  logger: Logger;
  /** The term's. */
  signal: AbortSignal;
  /** The store's heads, listed again before each upload. */
  storeHeads(): Promise<ChainHeads>;
  /** Restarts the chain from the store, when a spooled delta does not continue it. */
  resync(): Promise<void>;
  /**
   * Before anything leaves the spool: the store's history checked against etcd's (once a term), and the spooled
   * snapshots etcd's history does not hold set aside (StoreChain.prepareUpload).
   */
  prepare(): Promise<void>;
  /** The store holds a history etcd does not continue (found once the store answered): nothing more goes to it. */
  onRefused(err: ForeignHistoryError): void;
  /** A spooled full snapshot is in the store now. */
  onFullStored(ref: SnapshotRef): void;
  /**
   * Stores etcd's history `from..through` as a delta, where etcd still holds it; the name stored, or undefined
   * (storeHistoryDelta).
   */
  backfill(from: number, through: number): Promise<string | undefined>;
}

const RETRY_MS = 1_000;
const MAX_RETRY_MS = 30_000;

/**
 * Drains the spool into the store in order, oldest first, retrying with backoff while the store fails. Before
 * each upload the store is listed again, and a delta is uploaded only if it continues the store's chain (spoolFit): when the store changed under us (a new leader, a manual snapshot), the chain restarts from what the
 * store holds and etcd's history (or, if that was compacted, a full snapshot) supplies the rest. Nothing is lost
 * and nothing overlaps.
 */
export class SpoolUploader {
  private drainTimer?: NodeJS.Timeout;
  private readonly drainBackoff = new Backoff({ baseDelayMs: RETRY_MS, maxDelayMs: MAX_RETRY_MS });
  private storeFailing = false;
  private readonly logger: Logger;

  constructor(private readonly options: SpoolUploaderOptions) {
    this.logger = options.logger;
  }

  /** false from a failed upload until one succeeds. */
  get storeReachable(): boolean {
    return !this.storeFailing;
  }

  /** The store did not answer before the first upload (the term started in the spool): a drain says when it does. */
  storeUnreachable(): void {
    this.storeFailing = true;
  }

  stop(): void {
    clearTimeout(this.drainTimer);
  }

  /**
   * The store took an upload (or a whole drain): it is reachable from now on, before the spool's gauges say the
   * upload is done, so that no reader sees an empty spool beside an unreachable store.
   */
  private answered(): void {
    if (this.storeFailing) this.logger.info('the store is reachable again; uploading the spool');
    this.storeFailing = false;
  }

  /** Uploads the spool in order, retrying with backoff while the store fails. */
  drainSoon(delayMs: number): void {
    if (this.drainTimer || this.options.signal.aborted) return;
    this.drainTimer = setTimeout(async () => {
      this.drainTimer = undefined;
      try {
        await this.options.serial.run(() => this.drain());
        this.answered();
        this.drainBackoff.reset();
      } catch (err) {
        if (this.options.signal.aborted) return;
        if (err instanceof ForeignHistoryError) return this.options.onRefused(err);
        this.options.metrics.failures.inc({ error: 'store' });
        if (!this.storeFailing) {
          this.logger.warn('cannot upload deltas; they wait in the spool and are retried', {
            reason: errorMessage(err),
          });
        }
        this.storeFailing = true;
        this.drainSoon(this.drainBackoff.next());
      }
    }, delayMs);
  }

  /**
   * Uploads spooled deltas in order, up to `lastId`: by default what the spool holds as the drain starts. Runs in
   * the term's store queue. Never what comes while it runs: under writes that spool deltas as fast as they upload,
   * a drain that chased them would hold the queue, and a full snapshot queued behind it, for good; the next drain
   * (drainSoon, after each flush) takes them.
   */
  async drain(lastId = this.options.spool.last()?.id ?? 0): Promise<void> {
    const { spool, store, metrics, signal } = this.options;
    if (spool.depth > 0) await this.options.prepare();
    for (let delta = spool.first(); delta && delta.id <= lastId; delta = spool.first()) {
      signal.throwIfAborted();
      const heads = await this.options.storeHeads();
      const fit = spoolFit(delta, heads);
      if (fit === 'covered') {
        // Uploaded just before a crash, or covered by a full snapshot since.
        this.answered();
        await spool.remove(delta);
        continue;
      }
      if (fit === 'gap') {
        this.logger.warn("a spooled delta does not continue the store's chain; restarting the chain from the store", {
          delta: delta.name,
          storeRevision: heads.head,
        });
        metrics.resyncs.inc();
        await this.options.resync();
        return;
      }
      if (isSpooledFull(delta)) {
        await this.backfillBefore(delta, heads);
        await this.uploadFull(delta);
        continue;
      }
      const started = Date.now();
      try {
        await store.put(delta.name, spool.read(delta), {
          metadata: spooledMetadata(delta),
          signal: AbortSignal.any([signal, AbortSignal.timeout(this.options.deltaUploadTimeoutMs)]),
        });
      } catch (err) {
        metrics.failed('Incr', (Date.now() - started) / 1000);
        throw err;
      }
      this.answered();
      await spool.remove(delta);
      this.logger.info('delta snapshot saved', {
        name: delta.name,
        startRevision: delta.startRevision,
        lastRevision: delta.lastRevision,
        storedBytes: delta.bytes,
      });
      const createdAt = parseSnapshotName(delta.name)?.createdAt ?? 0;
      metrics.saved('Incr', delta.lastRevision, createdAt, (Date.now() - started) / 1000, delta.bytes);
      metrics.deltaLag.observe((Date.now() - delta.oldestEventAt) / 1000);
      metrics.latestDeltas.inc();
      metrics.latestDeltaRevisions.inc(delta.lastRevision - delta.startRevision + 1);
    }
  }

  /**
   * A spooled full snapshot starts a new chain (the term started while the store did not answer, so the chain's end
   * was not known): the revisions between the store's deltas and it go into a delta first, read from etcd's history
   * where it still holds them, so that a restore to any of them, or one past a damaged full, still works. What etcd
   * no longer holds is said; either way the full snapshot goes up (a failure here is retried with the next drain).
   */
  private async backfillBefore(full: SpooledDelta, heads: ChainHeads): Promise<void> {
    const from = (heads.deltaHead > 0 ? heads.deltaHead : (heads.fullsAfter[0] ?? 0)) + 1;
    if (heads.head === 0 || from > full.lastRevision) return;
    const name = await this.options.backfill(from, full.lastRevision);
    if (name) this.logger.info("stored etcd's history up to a spooled full snapshot as a delta", { name });
    else {
      this.logger.warn(
        'etcd compacted the revisions between the store and a spooled full snapshot: no delta holds them',
        {
          fromRevision: from,
          toRevision: full.lastRevision,
        },
      );
    }
  }

  /** Uploads a spooled full snapshot (the term started in the spool): a new chain starts there in the store. */
  private async uploadFull(full: SpooledDelta): Promise<void> {
    const { spool, store, metrics } = this.options;
    const started = Date.now();
    try {
      await store.put(full.name, spool.read(full), { metadata: spooledMetadata(full), signal: this.options.signal });
    } catch (err) {
      metrics.failed('Full', (Date.now() - started) / 1000);
      throw err;
    }
    this.answered();
    await spool.remove(full);
    const ref = parseSnapshotName(full.name)!;
    this.options.onFullStored(ref);
    this.logger.info('full snapshot saved', { name: full.name, revision: full.lastRevision, storedBytes: full.bytes });
    metrics.saved('Full', full.lastRevision, ref.createdAt, (Date.now() - started) / 1000, full.bytes);
    metrics.latestDeltas.set(0);
    metrics.latestDeltaRevisions.set(0);
  }
}
