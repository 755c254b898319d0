import { ForeignHistoryError, type SavedFullSnapshot, storeHistoryDelta } from '@etcd-steward/core/backup';
import { errorMessage, type Logger, OperationError } from '@etcd-steward/core/common';
import { type EtcdConnection, memberStatus } from '@etcd-steward/core/etcd';
import { type CompressionPolicy, parseSnapshotName, type SnapshotRef } from '@etcd-steward/core/format';
import type { SnapStore } from '@etcd-steward/core/store';
import { Serial } from '../serial.js';
import { DeltaWriter } from './delta-writer.js';
import type { FullSchedule } from './full-schedule.js';
import { FullSnapshots, type FullState } from './full-snapshots.js';
import type { SnapshotMetrics, SnapshotterGauges } from './snapshot-metrics.js';
import { isSpooledFull, type Spool, type SpooledDelta } from './spool/spool.js';
import { SpoolUploader } from './spool/spool-uploader.js';
import { SpoolTooSmallError, spoolFullSnapshot } from './spool/spooled-full.js';
import { StoreChain } from './store-chain.js';

export interface SnapshotTermOptions {
  /** This sidecar's own member (one endpoint): the watch and the full snapshots read from it. */
  connection: EtcdConnection;
  /** Written to only while this sidecar leads (a FencedStore). */
  store: SnapStore;
  spool: Spool;
  schedule: FullSchedule;
  /** 0 switches delta snapshots off, as in ebr. */
  deltaPeriodMs: number;
  memoryLimit: number;
  compression: CompressionPolicy;
  tempDir: string;
  /** An old leader's delta upload ends by then, so a new leader that waits this long cannot be overlapped. */
  deltaUploadTimeoutMs: number;
  metrics: SnapshotMetrics;
  logger: Logger;
  state: FullState;
  /** etcd's revision as last seen, for the watch lag. */
  etcdRevision(): number | undefined;
  /** Snapshots this sidecar found to differ from etcd's history in an earlier term (StoreChainOptions). */
  provenDifferent: ReadonlySet<string>;
  /**
   * The store turned out to hold a history etcd does not continue once it answered (the term started in the spool):
   * the term must end, and nothing more go to the store.
   */
  onRefused(err: ForeignHistoryError): void;
}

/**
 * The snapshots of one leadership term: full snapshots on the schedule (FullSnapshots), and deltas from a watch
 * of the whole keyspace written to the spool (DeltaWriter) and uploaded from there in order (SpoolUploader), on a
 * chain that starts from what the store holds (StoreChain). `serial` keeps what writes the store from
 * interleaving: uploads, full snapshots, resynchronisation. The watch goes on while a full snapshot is taken,
 * and the deltas go on through it: every revision is in a delta, whichever full snapshot a restore starts from.
 */
export class SnapshotTerm {
  private readonly serial = new Serial();
  private readonly term = new AbortController();
  private readonly writer: DeltaWriter;
  private readonly storeChain: StoreChain;
  private readonly uploader: SpoolUploader;
  private readonly fulls: FullSnapshots;
  private readonly logger: Logger;

  constructor(private readonly options: SnapshotTermOptions) {
    this.logger = options.logger;
    const { serial } = this;
    const { signal } = this.term;
    this.writer = new DeltaWriter({
      ...options,
      signal,
      onFlushed: () => this.uploader.drainSoon(0),
      onCompacted: (err) => this.fulls.afterCompaction(err),
      recheckHistory: () => this.recheckHistory(),
    });
    this.storeChain = new StoreChain({ ...options, writer: this.writer, onBaseLost: () => this.fulls.baseLost() });
    this.uploader = new SpoolUploader({
      ...options,
      serial,
      signal,
      storeHeads: () => this.storeChain.heads(),
      resync: () => this.resync(),
      prepare: async () => {
        if ((await this.storeChain.prepareUpload()) && this.storeChain.forked) this.fulls.baseLost();
      },
      onRefused: (err) => options.onRefused(err),
      onFullStored: (ref) => this.fulls.stored(ref),
      backfill: (from, through) =>
        storeHistoryDelta(options.connection, options.store, { from, through }, { ...options, signal }),
    });
    this.fulls = new FullSnapshots({
      ...options,
      serial,
      signal,
      drainSpool: () => this.uploader.drain(),
      coverThrough: (revision, restart) => this.writer.coverThrough(revision, restart),
      chainPosition: () => this.writer.position,
      onStored: (ref) => {
        this.storeChain.lastFull = ref;
      },
    });
  }

  async start(): Promise<void> {
    try {
      await this.serial.run(() => this.storeChain.resync());
    } catch (err) {
      // A store that holds another history is not a store that does not answer: nothing goes to it, not even later.
      if (err instanceof ForeignHistoryError) throw err;
      await this.startInSpool(err);
      this.fulls.armNext();
      this.startDeltas();
      return;
    }
    this.options.state.fullTooLargeToSpool = false;
    const { lastFull } = this.storeChain;
    const due = this.storeChain.forked
      ? "etcd's history left the store's"
      : await this.unchangedSince(
          lastFull,
          this.options.schedule.dueAtStart(
            lastFull && { createdAt: lastFull.createdAt, final: lastFull.final },
            this.options.state.lastFullFailed,
            new Date(),
          ),
        );
    this.options.state.fullRequired = due !== undefined;
    if (due) {
      this.logger.info('taking a full snapshot at start-up', { reason: due });
      await this.fulls.scheduledFull();
    } else {
      this.fulls.armNext();
    }
    this.startDeltas();
  }

  /**
   * `due`, unless etcd has not changed since the store's newest full snapshot (a final one, say, from just before
   * a restart): another one at the same revision would hold nothing new.
   */
  private async unchangedSince(
    lastFull: SnapshotRef | undefined,
    due: string | undefined,
  ): Promise<string | undefined> {
    if (!due || !lastFull) return due;
    const { revision } = await memberStatus(this.options.connection, { timeoutMs: 5_000 }).catch(() => ({
      revision: 0,
    }));
    if (revision !== lastFull.lastRevision) return due;
    this.logger.info("no full snapshot at start-up: the newest one holds etcd's current revision", {
      name: lastFull.name,
      revision,
      due,
    });
    return undefined;
  }

  /**
   * After a broken watch: the store's and the spool's history checked against etcd's again before the watch reads
   * on (etcd may have been restored meanwhile). A check that cannot be made now is made before the next upload.
   */
  private async recheckHistory(): Promise<void> {
    this.storeChain.doubt();
    try {
      await this.serial.run(() => this.resync());
    } catch (err) {
      if (err instanceof ForeignHistoryError) return this.options.onRefused(err);
      this.logger.warn("cannot check etcd's history against the store's now; it is checked before the next upload", {
        reason: errorMessage(err),
      });
    }
  }

  /** The chain restarted from the store (StoreChain.resync); a fork owes a full snapshot at once. */
  private async resync(): Promise<void> {
    await this.storeChain.resync();
    if (this.storeChain.forked) this.fulls.baseLost();
  }

  private startDeltas(): void {
    if (this.options.deltaPeriodMs > 0) this.writer.start(this.options.deltaPeriodMs);
    this.uploader.drainSoon(0);
  }

  /**
   * The store does not answer, so the chain's position in it is unknown: a new chain starts with a full snapshot
   * in the spool, and the deltas after it wait there too, as in any outage of the store. Once the store answers,
   * the drain uploads them in order (after a delta of what etcd wrote between the store's chain and the full
   * snapshot, SpoolUploader.backfillBefore), or, if the store holds newer snapshots by then, keeps what continues
   * them.
   */
  private async startInSpool(storeError: unknown): Promise<void> {
    const { state } = this.options;
    if (state.fullTooLargeToSpool) throw storeError;
    let full: SpooledDelta;
    try {
      full = await this.serial.run(() =>
        spoolFullSnapshot({ ...this.options, logger: this.logger, signal: this.term.signal }),
      );
    } catch (err) {
      if (err instanceof SpoolTooSmallError) state.fullTooLargeToSpool = true;
      throw new OperationError(
        `${errorMessage(storeError)}; and no full snapshot could be spooled meanwhile: ${errorMessage(err)}`,
        { cause: err },
      );
    }
    state.fullRequired = true; // until it is in the store
    this.uploader.storeUnreachable(); // the drain says when the store is back
    await this.writer.restart(async () => full.lastRevision, full.line ?? undefined);
    this.logger.warn(
      'the store does not answer: deltas wait in the spool after the full snapshot that starts their chain',
      {
        reason: errorMessage(storeError),
        afterRevision: full.lastRevision,
      },
    );
  }

  /**
   * Ends the term. On shutdown (`finish`), first lets the watch reach etcd's current revision, writes what it
   * holds as a last delta and uploads the spool (what cannot be uploaded stays in the spool for the next
   * start), then takes the final full snapshot when asked to.
   */
  async stop(finish?: { final: boolean; catchUpMs: number }): Promise<void> {
    this.writer.stopFlushing();
    this.fulls.stop();
    this.uploader.stop();
    if (finish) {
      await this.finishDeltas(finish.catchUpMs);
      if (finish.final) {
        try {
          const saved = await this.serial.run(() => this.fulls.take(true));
          // The deltas go on through the final full snapshot too, so that it holds no revision of its own.
          await this.finishDeltas(finish.catchUpMs, saved.revision);
        } catch (err) {
          this.logger.error('final full snapshot failed', { reason: errorMessage(err) });
        }
      }
    }
    this.term.abort(new Error('the snapshotter stopped'));
    await this.writer.watchEnded();
    await this.serial.run(async () => {});
    await this.writer.discard();
  }

  /**
   * At shutdown: lets the watch reach `revision` (etcd's current one by default), writes what it holds as a last
   * delta and uploads the spool; what cannot be uploaded stays in the spool for the next start.
   */
  private async finishDeltas(catchUpMs: number, revision?: number): Promise<void> {
    try {
      if (this.writer.active) await this.writer.catchUp(catchUpMs, revision);
      await this.writer.flush();
      await this.serial.run(() => this.uploader.drain());
    } catch (err) {
      this.logger.warn('at shutdown, deltas not yet uploaded stay in the spool for the next start', {
        reason: errorMessage(err),
        spooled: this.options.spool.depth,
      });
    }
  }

  /** An out-of-schedule full snapshot (HTTP API); see FullSnapshots.trigger. */
  triggerFull(final: boolean): Promise<SavedFullSnapshot> {
    return this.fulls.trigger(final);
  }

  /** An out-of-schedule delta of what has been watched so far; undefined when there is nothing new (as ebr). */
  async triggerDelta(): Promise<SnapshotRef | undefined> {
    if (!this.writer.active) throw new Error('delta snapshots are switched off (--delta-snapshot-period 0)');
    // Watched events may also wait in the spool already (a full snapshot sends the open delta there).
    const delta = (await this.writer.flush()) ?? this.options.spool.last();
    if (!delta || isSpooledFull(delta)) return undefined;
    await this.serial.run(() => this.uploader.drain(delta.id));
    return parseSnapshotName(delta.name);
  }

  healthy(): boolean {
    return !this.options.state.lastFullFailed && this.uploader.storeReachable;
  }

  /** The oldest revision the watch still needs from etcd's history; undefined while it does not watch. */
  get neededRevision(): number | undefined {
    return this.writer.active ? this.writer.position + 1 : undefined;
  }

  gauges(): Omit<SnapshotterGauges, 'spoolDeltas' | 'spoolBytes' | 'fullRequired'> {
    return {
      storeReachable: () => this.uploader.storeReachable,
      bufferedBytes: () => this.writer.bufferedBytes,
      watchLagRevisions: () => {
        const etcd = this.options.etcdRevision();
        if (etcd === undefined || !this.writer.active) return undefined;
        return Math.max(0, etcd - this.writer.position);
      },
      deltaRequired: () => this.writer.hasOpenDelta || this.options.spool.depth > 0,
      historyRefused: () => false,
    };
  }
}
