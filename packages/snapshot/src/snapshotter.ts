import { setTimeout as sleep } from 'node:timers/promises';
import {
  Backoff,
  type CompressionPolicy,
  collectGarbage,
  type DeltaEvent,
  type EtcdConnection,
  errorMessage,
  type Logger,
  listSnapshots,
  METADATA_ETCD_VERSION,
  METADATA_SHA256,
  memberStatus,
  OperationError,
  parseSnapshotName,
  type SavedFullSnapshot,
  type SnapStore,
  type SnapshotRef,
  takeFullSnapshot,
  WatchCompactedError,
  watchRevisions,
} from '@etcd-steward/core';
import { trimDelta } from './delta-trim.js';
import type { FullSchedule } from './full-schedule.js';
import { OpenDelta } from './open-delta.js';
import { Serial } from './serial.js';
import { SingleFlight } from './single-flight.js';
import type { SnapshotMetrics, SnapshotterGauges } from './snapshot-metrics.js';
import { isSpooledFull, type Spool, type SpooledDelta } from './spool.js';
import { SpoolTooSmallError, spoolFullSnapshot } from './spooled-full.js';

export interface SnapshotterOptions {
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
  /**
   * Outlives a term. `lastFullFailed`: a failed full snapshot makes the next term start with one (ebr's
   * PrevFullSnapshotSucceeded). `fullRequired`: a full snapshot is owed (due at start-up, failed, or the store
   * lost its base) and none has been stored since. `fullTooLargeToSpool`: a term that started while the store did not
   * answer could not spool its full snapshot (--spool-max-bytes); the next ones do not take it again in vain.
   */
  state: { lastFullFailed: boolean; fullRequired: boolean; fullTooLargeToSpool: boolean };
  /** etcd's revision as last seen, for the watch lag. */
  etcdRevision(): number | undefined;
}

const MAX_TIMER_MS = 2 ** 31 - 1;
const RETRY_MS = 1_000;
const MAX_RETRY_MS = 30_000;
const FULL_RETRY_MS = 10_000;
const MAX_FULL_RETRY_MS = 300_000;

/**
 * The snapshots of one leadership term: full snapshots on the schedule, and deltas from a watch of the whole
 * keyspace, written to the spool and uploaded from there in order.
 *
 * The chain's head is the last revision of the newest snapshot, in the store or in the spool; the next delta
 * starts right after it. Watched events go straight into the open delta (a part file in the spool), which a
 * flush finishes. Two queues keep operations from interleaving: `serial` for what writes the store (uploads,
 * full snapshots, resynchronisation), `local` for what moves the head or the open delta (writes, flushes, and
 * the adjustments a full snapshot or resynchronisation makes). Flushes never wait for the store, so the watch
 * goes on while a full snapshot is taken; the delta that snapshot cuts through is then trimmed (coverThrough).
 *
 * Before each upload the store is listed again, and a delta is uploaded only if it starts right after the
 * store's newest snapshot: when the store changed under us (a new leader, a manual snapshot), the chain restarts
 * from what the store holds and etcd's history (or, if that was compacted, a full snapshot) supplies the rest.
 * Nothing is lost and nothing overlaps.
 */
export class Snapshotter {
  private chainHead = 0;
  private watchedRevision = 0;
  private lastFull?: SnapshotRef;
  /** The delta being written; undefined until an event comes after the chain's head. */
  private open?: OpenDelta;
  /** Store writes and what must not run beside them: uploads, full snapshots, resynchronisation. */
  private readonly serial = new Serial();
  /** The local chain (head, open delta, spool contents): writes, flushes, and what a full snapshot or resync adjusts. */
  private readonly local = new Serial();
  /** Requested full snapshots, by `final`: requests that come while one is queued or running share it. */
  private readonly requestedFull = new SingleFlight<boolean, SavedFullSnapshot>();
  private readonly term = new AbortController();
  private watchControl?: AbortController;
  private watching?: Promise<void>;
  private deltaTimer?: NodeJS.Timeout;
  private fullTimer?: NodeJS.Timeout;
  private drainTimer?: NodeJS.Timeout;
  private readonly drainBackoff = new Backoff({ baseDelayMs: RETRY_MS, maxDelayMs: MAX_RETRY_MS });
  private readonly fullBackoff = new Backoff({ baseDelayMs: FULL_RETRY_MS, maxDelayMs: MAX_FULL_RETRY_MS });
  private storeFailing = false;
  private spoolFull = false;
  private readonly logger: Logger;

  constructor(private readonly options: SnapshotterOptions) {
    this.logger = options.logger;
  }

  async start(): Promise<void> {
    try {
      await this.serial.run(() => this.resync());
    } catch (err) {
      await this.startInSpool(err);
      this.armFullTimer(this.options.schedule.next(new Date()).getTime());
      this.startDeltas();
      return;
    }
    this.options.state.fullTooLargeToSpool = false;
    const due = this.options.schedule.dueAtStart(
      this.lastFull && { createdAt: this.lastFull.createdAt, final: this.lastFull.final },
      this.options.state.lastFullFailed,
      new Date(),
    );
    this.options.state.fullRequired = due !== undefined;
    if (due) {
      this.logger.info('taking a full snapshot at start-up', { reason: due });
      await this.scheduledFull();
    } else {
      this.armFullTimer(this.options.schedule.next(new Date()).getTime());
    }
    this.startDeltas();
  }

  private startDeltas(): void {
    if (this.options.deltaPeriodMs > 0) {
      this.watching = this.watchLoop();
      this.deltaTimer = setInterval(() => void this.periodicFlush(), this.options.deltaPeriodMs);
    }
    this.drainSoon(0);
  }

  /**
   * The store does not answer, so the chain's position in it is unknown: a new chain starts with a full snapshot
   * in the spool, and the deltas after it wait there too, as in any outage of the store. Once the store answers,
   * the drain uploads them in order, or, if the store holds newer snapshots by then, keeps what continues them.
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
    this.storeFailing = true; // the drain says when the store is back
    await this.local.run(async () => {
      this.chainHead = full.lastRevision;
    });
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
    clearInterval(this.deltaTimer);
    clearTimeout(this.fullTimer);
    clearTimeout(this.drainTimer);
    if (finish) {
      try {
        if (this.watching) await this.catchUp(finish.catchUpMs);
        await this.local.run(() => this.flush());
        await this.serial.run(() => this.drain());
      } catch (err) {
        this.logger.warn('at shutdown, deltas not yet uploaded stay in the spool for the next start', {
          reason: errorMessage(err),
          spooled: this.options.spool.depth,
        });
      }
      if (finish.final) {
        await this.serial
          .run(() => this.full(true))
          .catch((err) => {
            this.logger.error('final full snapshot failed', { reason: errorMessage(err) });
          });
      }
    }
    this.term.abort(new Error('the snapshotter stopped'));
    await this.watching;
    await this.serial.run(async () => {});
    // What was not flushed stays in etcd: the next term, or the next start, reads it again.
    await this.local.run(() => this.discardOpen());
  }

  /**
   * An out-of-schedule full snapshot (HTTP API); the schedule goes on from now. A request that comes while
   * another one's snapshot is queued or running gets that snapshot.
   */
  triggerFull(final: boolean): Promise<SavedFullSnapshot> {
    return this.requestedFull.run(final, async () => {
      const saved = await this.serial.run(() => this.full(final));
      this.armFullTimer(this.options.schedule.next(new Date()).getTime());
      return saved;
    });
  }

  /** An out-of-schedule delta of what has been watched so far; undefined when there is nothing new (as ebr). */
  async triggerDelta(): Promise<SnapshotRef | undefined> {
    if (!this.watching) throw new Error('delta snapshots are switched off (--delta-snapshot-period 0)');
    // Watched events may also wait in the spool already (a full snapshot sends the open delta there).
    const delta = (await this.local.run(() => this.flush())) ?? this.options.spool.last();
    if (!delta || isSpooledFull(delta)) return undefined;
    await this.serial.run(() => this.drain());
    return parseSnapshotName(delta.name);
  }

  healthy(): boolean {
    return !this.options.state.lastFullFailed && !this.storeFailing;
  }

  gauges(): Omit<SnapshotterGauges, 'spoolDeltas' | 'spoolBytes' | 'fullRequired'> {
    return {
      storeReachable: () => !this.storeFailing,
      bufferedBytes: () => this.open?.bytes ?? 0,
      watchLagRevisions: () => {
        const etcd = this.options.etcdRevision();
        if (etcd === undefined || !this.watching) return undefined;
        return Math.max(0, etcd - Math.max(this.watchedRevision, this.chainHead));
      },
      deltaRequired: () => this.open !== undefined || this.options.spool.depth > 0,
    };
  }

  /**
   * Writes the watch into the open delta; stops reading while the open delta is at its limit and cannot be
   * flushed (the spool is full), and while the spool's disk is behind, which holds etcd back.
   */
  private async watchLoop(): Promise<void> {
    const backoff = new Backoff({ baseDelayMs: RETRY_MS, maxDelayMs: MAX_RETRY_MS });
    let broken = false;
    while (!this.term.signal.aborted) {
      const control = new AbortController();
      this.watchControl = control;
      const signal = AbortSignal.any([this.term.signal, control.signal]);
      try {
        for await (const batch of watchRevisions(this.options.connection, this.resumeRevision(), { signal })) {
          // A batch that arrives after a rewatch belongs to a chain position that no longer exists.
          if (signal.aborted) break;
          backoff.reset();
          if (broken) this.logger.info('the watch is back', { revision: batch.revision });
          broken = false;
          this.watchedRevision = batch.revision;
          if (batch.events.length > 0) await this.local.run(() => this.write(batch.events, signal));
          while ((this.open?.bytes ?? 0) >= this.options.memoryLimit && !signal.aborted) {
            const flushed = await this.local.run(() => this.flush());
            if (flushed) this.drainSoon(0);
            else await sleep(RETRY_MS, undefined, { signal }).catch(() => {});
          }
        }
      } catch (err) {
        if (this.term.signal.aborted) return;
        if (control.signal.aborted) continue;
        if (err instanceof WatchCompactedError) {
          await this.onCompacted(err);
          continue;
        }
        this.options.metrics.failures.inc({ error: 'etcd' });
        if (!broken) {
          this.logger.warn('the watch broke off; resuming with backoff', {
            fromRevision: this.resumeRevision(),
            reason: errorMessage(err),
          });
        }
        broken = true;
        await backoff.wait(this.term.signal).catch(() => {});
      }
    }
  }

  private resumeRevision(): number {
    return Math.max(this.chainHead, this.open?.lastRevision ?? 0) + 1;
  }

  /** Writes the events the chain does not cover yet into the open delta, starting one when there is none. */
  private async write(events: DeltaEvent[], signal: AbortSignal): Promise<void> {
    // A batch queued before a rewatch belongs to a chain position that no longer exists. With nothing in the store
    // (or spool) there is no chain to continue yet: the full snapshot that starts it comes first (etcd's revision 1
    // holds no event, so a delta from there could never begin).
    if (signal.aborted || this.chainHead === 0) return;
    const fresh =
      events[0].modRevision > this.chainHead ? events : events.filter((e) => e.modRevision > this.chainHead);
    if (fresh.length === 0) return;
    this.open ??= OpenDelta.begin(this.options.spool, this.chainHead + 1, this.options.compression);
    const broken = this.open.gap(fresh);
    if (broken) {
      this.options.metrics.failures.inc({ error: 'chain' });
      this.logger.error('watched events do not continue the chain; reading them from etcd again', { reason: broken });
      return this.rewatch();
    }
    try {
      await this.open.add(fresh);
    } catch (err) {
      this.spoolFailed(err);
      await this.rewatch();
    }
  }

  private spoolFailed(err: unknown): void {
    this.options.metrics.failures.inc({ error: 'spool' });
    this.logger.error('cannot write a delta to the spool; reading its revisions from etcd again', {
      reason: errorMessage(err),
    });
  }

  /** Drops the open delta and watches again from right after the chain's head. */
  private async rewatch(): Promise<void> {
    this.watchedRevision = this.chainHead;
    this.watchControl?.abort();
    await this.discardOpen();
  }

  private async discardOpen(): Promise<void> {
    const open = this.open;
    this.open = undefined;
    await open?.discard();
  }

  private async onCompacted(err: WatchCompactedError): Promise<void> {
    this.options.metrics.compacted.inc();
    this.options.state.fullRequired = true;
    this.logger.error('etcd compacted its history past the revision the next delta needs; taking a full snapshot now', {
      neededRevision: err.fromRevision,
      compactRevision: err.compactRevision,
    });
    try {
      await this.serial.run(() => this.full(false));
    } catch (fullErr) {
      this.logger.error('full snapshot after compaction failed; trying again', { reason: errorMessage(fullErr) });
      await sleep(FULL_RETRY_MS, undefined, { signal: this.term.signal }).catch(() => {});
    }
  }

  private async periodicFlush(): Promise<void> {
    if (this.term.signal.aborted) return;
    const flushed = await this.local.run(() => this.flush());
    if (flushed) this.drainSoon(0);
  }

  /** Finishes the open delta as the next delta in the spool. Undefined when there was nothing to write or no room. */
  private async flush(): Promise<SpooledDelta | undefined> {
    const open = this.open;
    if (!open || this.term.signal.aborted) return undefined;
    const { spool } = this.options;
    if (!spool.hasRoom()) {
      if (!this.spoolFull)
        this.logger.warn('the spool is full: not reading etcd until uploads make room', { bytes: spool.bytes });
      this.spoolFull = true;
      return undefined;
    }
    this.spoolFull = false;
    this.open = undefined;
    try {
      const delta = await open.finish();
      this.chainHead = delta.lastRevision;
      // What carried the delta (watch responses, JSON chunks, compressed blocks) is garbage now, and the part of it
      // that lived long enough sits in the old generation, where V8 lets ~64 MB pile up before it looks (memory-bound.ts).
      collectGarbage('major');
      return delta;
    } catch (err) {
      this.spoolFailed(err);
      await this.rewatch();
      return undefined;
    }
  }

  /** Uploads the spool in order, retrying with backoff while the store fails. */
  private drainSoon(delayMs: number): void {
    if (this.drainTimer || this.term.signal.aborted) return;
    this.drainTimer = setTimeout(async () => {
      this.drainTimer = undefined;
      try {
        await this.serial.run(() => this.drain());
        if (this.storeFailing) this.logger.info('the store is reachable again; the spool is uploaded');
        this.storeFailing = false;
        this.drainBackoff.reset();
      } catch (err) {
        if (this.term.signal.aborted) return;
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

  /** Uploads spooled deltas in order: all of them, or those up to `lastId` (what a full snapshot waits for). */
  private async drain(lastId = Number.POSITIVE_INFINITY): Promise<void> {
    const { spool, store, metrics } = this.options;
    for (let delta = spool.first(); delta && delta.id <= lastId; delta = spool.first()) {
      this.term.signal.throwIfAborted();
      const head = await this.storeHead();
      if (delta.lastRevision <= head) {
        // Uploaded just before a crash, or covered by a full snapshot since.
        await spool.remove(delta);
        continue;
      }
      if (isSpooledFull(delta)) {
        await this.uploadFull(delta);
        continue;
      }
      if (delta.startRevision !== head + 1) {
        this.logger.warn("a spooled delta does not continue the store's chain; restarting the chain from the store", {
          delta: delta.name,
          storeRevision: head,
        });
        metrics.resyncs.inc();
        await this.resync();
        return;
      }
      const started = Date.now();
      try {
        await store.put(delta.name, spool.read(delta), {
          metadata: { [METADATA_SHA256]: delta.sha256 },
          signal: AbortSignal.any([this.term.signal, AbortSignal.timeout(this.options.deltaUploadTimeoutMs)]),
        });
      } catch (err) {
        metrics.failed('Incr', (Date.now() - started) / 1000);
        throw err;
      }
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

  /** Uploads a spooled full snapshot (startInSpool): a new chain starts there in the store. */
  private async uploadFull(full: SpooledDelta): Promise<void> {
    const { spool, store, metrics, state } = this.options;
    const started = Date.now();
    const metadata: Record<string, string> = { [METADATA_SHA256]: full.sha256 };
    if (full.etcdVersion) metadata[METADATA_ETCD_VERSION] = full.etcdVersion;
    try {
      await store.put(full.name, spool.read(full), { metadata, signal: this.term.signal });
    } catch (err) {
      metrics.failed('Full', (Date.now() - started) / 1000);
      throw err;
    }
    await spool.remove(full);
    const ref = parseSnapshotName(full.name)!;
    this.lastFull = ref;
    state.lastFullFailed = false;
    state.fullRequired = false;
    this.logger.info('full snapshot saved', { name: full.name, revision: full.lastRevision, storedBytes: full.bytes });
    metrics.saved('Full', full.lastRevision, ref.createdAt, (Date.now() - started) / 1000, full.bytes);
    metrics.latestDeltas.set(0);
    metrics.latestDeltaRevisions.set(0);
  }

  /**
   * Starts the chain from what the store holds: its newest snapshot's last revision, followed by the spooled
   * deltas that continue it, or by a spooled full snapshot newer than it and the deltas that continue that (those
   * the store already covers go; those that do not fit go too, their revisions come again from etcd). Then the
   * watch starts over right after the new head.
   */
  private async resync(): Promise<void> {
    const entries = await listSnapshots(this.options.store);
    const head = entries.reduce((max, e) => Math.max(max, e.lastRevision), 0);
    this.noteFull(entries);
    this.reportStore(entries);
    await this.local.run(async () => {
      let chain = head;
      for (const delta of this.options.spool.list()) {
        // A spooled full snapshot newer than the store's starts a chain of its own.
        if (delta.lastRevision > head && (delta.startRevision === chain + 1 || isSpooledFull(delta))) {
          chain = delta.lastRevision;
          continue;
        }
        if (delta.lastRevision > head) {
          this.logger.warn('dropping a spooled delta that does not continue the chain; etcd still has its revisions', {
            delta: delta.name,
            chainRevision: chain,
          });
        }
        await this.options.spool.remove(delta);
      }
      this.chainHead = chain;
      await this.rewatch();
      this.logger.info('chain resumes', {
        afterRevision: chain,
        storeRevision: head,
        spooled: this.options.spool.depth,
      });
    });
  }

  /**
   * A full snapshot at `revision` now covers the chain up to there. The watch went on while it was taken, so
   * the spool may hold deltas past it: those it covers go, the one it cuts through is trimmed to start right
   * after it, so the next delta in the store starts exactly at revision + 1.
   */
  private async coverThrough(revision: number): Promise<void> {
    const { spool } = this.options;
    // What the open delta holds goes to the spool, to be trimmed with the rest; when the spool has no room, it goes,
    // and its events after the snapshot come again from etcd.
    if (this.open && !(await this.flush())) await this.rewatch();
    for (const delta of spool.list()) {
      if (delta.lastRevision <= revision) {
        await spool.remove(delta);
      } else if (delta.startRevision <= revision && !isSpooledFull(delta)) {
        try {
          const trimmed = await trimDelta(spool, delta, revision, this.options.compression);
          this.logger.info('trimmed a spooled delta to start after the full snapshot', {
            from: delta.name,
            to: trimmed.name,
          });
        } catch (err) {
          // Its revisions are still in etcd: forget it and what follows, and watch them again.
          this.logger.warn('cannot trim a spooled delta; reading its revisions from etcd again', {
            delta: delta.name,
            reason: errorMessage(err),
          });
          for (const later of spool.list().filter((d) => d.id >= delta.id)) await spool.remove(later);
          this.chainHead = revision;
          await this.rewatch();
          return;
        }
      }
    }
    if (revision > this.chainHead) {
      this.chainHead = revision;
      // With no chain to write to before this snapshot, the watch read on without writing: it starts over after it.
      if (this.watchedRevision > revision) await this.rewatch();
    }
  }

  private async full(final: boolean): Promise<SavedFullSnapshot> {
    this.term.signal.throwIfAborted();
    try {
      // Keeps the chain before this full snapshot whole, when the store allows. Only what is spooled now: deltas
      // keep coming while it runs, and chasing them could hold the full snapshot back for good.
      await this.drain(this.options.spool.last()?.id ?? 0);
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
        signal: this.term.signal,
      });
    } catch (err) {
      if (!this.term.signal.aborted) {
        state.lastFullFailed = true;
        state.fullRequired = true;
        metrics.failed('Full', (Date.now() - started) / 1000);
        metrics.failures.inc({ error: 'full' });
      }
      throw err;
    }
    state.lastFullFailed = false;
    state.fullRequired = false;
    this.lastFull = saved.ref;
    metrics.saved('Full', saved.revision, saved.ref.createdAt, saved.durationMs / 1000, saved.storedSize);
    metrics.latestDeltas.set(0);
    metrics.latestDeltaRevisions.set(0);
    await this.local.run(() => this.coverThrough(saved.revision));
    return saved;
  }

  private async scheduledFull(): Promise<void> {
    try {
      await this.serial.run(() => this.full(false));
      this.fullBackoff.reset();
      this.armFullTimer(this.options.schedule.next(new Date()).getTime());
    } catch (err) {
      if (this.term.signal.aborted) return;
      const retryMs = this.fullBackoff.next();
      this.logger.error('full snapshot failed; trying again', {
        reason: errorMessage(err),
        retryInSeconds: retryMs / 1000,
      });
      this.armFullTimer(Date.now() + retryMs);
    }
  }

  private armFullTimer(at: number): void {
    clearTimeout(this.fullTimer);
    if (this.term.signal.aborted) return;
    const wait = Math.min(Math.max(at - Date.now(), 0), MAX_TIMER_MS);
    // Timers cannot wait longer than ~24.8 days; a monthly schedule re-arms until its time has come.
    this.fullTimer = setTimeout(() => (Date.now() >= at ? void this.scheduledFull() : this.armFullTimer(at)), wait);
  }

  /** Waits (at most `ms`) until the watch has delivered etcd's current revision. */
  private async catchUp(ms: number): Promise<void> {
    const target = (await memberStatus(this.options.connection, { timeoutMs: 5_000 })).revision;
    const deadline = Date.now() + ms;
    while (Math.max(this.watchedRevision, this.chainHead) < target && Date.now() < deadline) await sleep(50);
  }

  private async storeHead(): Promise<number> {
    const entries = await listSnapshots(this.options.store);
    this.noteFull(entries);
    return entries.reduce((max, e) => Math.max(max, e.lastRevision), 0);
  }

  /**
   * Keeps track of the store's newest full snapshot. A store that lost its full snapshots under the sidecar (emptied,
   * or holding deltas only) gives the deltas no base: a new chain starts with a full snapshot, now.
   */
  private noteFull(entries: readonly SnapshotRef[]): void {
    const newest = entries.findLast((e) => e.kind === 'Full');
    if (!newest && this.lastFull) {
      this.options.state.fullRequired = true;
      this.armFullTimer(Date.now());
    }
    this.lastFull = newest;
  }

  private reportStore(entries: Array<SnapshotRef>): void {
    const { metrics } = this.options;
    const fullAt = entries.findLastIndex((e) => e.kind === 'Full');
    const deltas = entries.slice(fullAt + 1).filter((e) => e.kind === 'Incr');
    for (const kind of ['Full', 'Incr'] as const) {
      const newest = entries.findLast((e) => e.kind === kind);
      if (newest) {
        metrics.latestRevision.set({ kind }, newest.lastRevision);
        metrics.latestTimestamp.set({ kind }, newest.createdAt);
      }
    }
    metrics.latestDeltas.set(deltas.length);
    metrics.latestDeltaRevisions.set(
      deltas.length ? deltas[deltas.length - 1].lastRevision - deltas[0].startRevision + 1 : 0,
    );
  }
}
