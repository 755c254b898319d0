import { setTimeout as sleep } from 'node:timers/promises';
import { compareEventsWithEtcd } from '@etcd-steward/core/backup';
import { Backoff, collectGarbage, errorMessage, type Logger } from '@etcd-steward/core/common';
import { type EtcdConnection, memberStatus, WatchCompactedError, watchRevisions } from '@etcd-steward/core/etcd';
import type { CompressionPolicy, DeltaEvent } from '@etcd-steward/core/format';
import { Serial } from '../serial.js';
import type { SnapshotMetrics } from './snapshot-metrics.js';
import { OpenDelta } from './spool/open-delta.js';
import type { Spool, SpooledDelta } from './spool/spool.js';
import { assertWatchable, deltasGoOnFrom } from './watch-start.js';

export interface DeltaWriterOptions {
  /** This sidecar's own member: the watch reads from it. */
  connection: EtcdConnection;
  spool: Spool;
  compression: CompressionPolicy;
  memoryLimit: number;
  metrics: SnapshotMetrics;
  logger: Logger;
  /** The term's: once aborted, nothing more is watched, written or flushed. */
  signal: AbortSignal;
  /** A delta was finished into the spool and waits for its upload. */
  onFlushed(): void;
  /** etcd compacted the revisions the next delta needs; the watch goes on once this resolves. */
  onCompacted(err: WatchCompactedError): Promise<void>;
  /**
   * The watch broke off and is about to start again: etcd may have been restored meanwhile (its data replaced, it
   * restarted) and go on with another history from the chain's position. The term checks the store's and the
   * spool's history against etcd's again (it may restart this writer), and never fails: what it cannot check now
   * is checked before the next upload.
   */
  recheckHistory(): Promise<void>;
}

const RETRY_MS = 1_000;
const MAX_RETRY_MS = 30_000;

/**
 * The local end of the chain: a watch of the whole keyspace written into the open delta (a part file in the
 * spool), which a flush finishes as the next spooled delta. The chain's head is the last revision of the newest
 * snapshot, in the store or in the spool; the next delta starts right after it. One queue (`local`) keeps what
 * moves the head or the open delta from interleaving: writes, flushes, and the adjustments a full snapshot
 * (coverThrough) or a resynchronisation (restart) makes. Flushes never wait for the store.
 */
export class DeltaWriter {
  private chainHead = 0;
  private watchedRevision = 0;
  /** The delta being written; undefined until an event comes after the chain's head. */
  private open?: OpenDelta;
  private readonly local = new Serial();
  private watchControl?: AbortController;
  private watching?: Promise<void>;
  private deltaTimer?: NodeJS.Timeout;
  private spoolFull = false;
  /** The history line of the watch now running (SpooledDelta.line); 0 while none runs. */
  private watchLine = 0;
  /**
   * The line the next watch writes to: a new one, a given one (a full snapshot spooled right before it), or, when
   * unset, the one before (a watch that broke off, etcd proven to hold what it wrote).
   */
  private nextLine?: number | 'new' = 'new';
  /** The newest revision written in the current line, and its events: what proves etcd still holds the line. */
  private lastWritten?: { revision: number; events: DeltaEvent[] };
  private readonly logger: Logger;

  constructor(private readonly options: DeltaWriterOptions) {
    this.logger = options.logger;
  }

  /** Whether the watch runs (delta snapshots are on and the term started them). */
  get active(): boolean {
    return this.watching !== undefined;
  }

  /** How far the chain is known: the watched revision, or the head when the watch is behind it. */
  get position(): number {
    return Math.max(this.watchedRevision, this.chainHead);
  }

  get bufferedBytes(): number {
    return this.open?.bytes ?? 0;
  }

  get hasOpenDelta(): boolean {
    return this.open !== undefined;
  }

  /**
   * The history line of the watch now running: what it spools is etcd's history as etcd holds it now. Every other
   * line was written from a watch that ended (etcd may have been restored since) and is proven before its upload.
   */
  get line(): number {
    return this.watchLine;
  }

  /** Starts the watch, and finishes the open delta every `periodMs`. */
  start(periodMs: number): void {
    this.watching = this.watchLoop();
    this.deltaTimer = setInterval(() => void this.periodicFlush(), periodMs);
  }

  /** No more periodic flushes; the watch goes on until the term's signal aborts. */
  stopFlushing(): void {
    clearInterval(this.deltaTimer);
  }

  /** Once the term's signal aborted: waits for the watch to end. */
  async watchEnded(): Promise<void> {
    await this.watching;
  }

  /** Drops what was not flushed: it stays in etcd, and the next term, or the next start, reads it again. */
  discard(): Promise<void> {
    return this.local.run(() => this.discardOpen());
  }

  /** Finishes the open delta as the next delta in the spool. Undefined when there was nothing to write or no room. */
  flush(): Promise<SpooledDelta | undefined> {
    return this.local.run(() => this.flushOpen());
  }

  /**
   * Moves the head to what `reconcile` returns (it may adjust the spool meanwhile), and watches again from right
   * after it; `line`: the history line of a full snapshot just spooled at the new head, which the watch continues.
   * A head where this writer's chain ends keeps the running watch: etcd may have compacted what it read unflushed.
   */
  restart(reconcile: () => Promise<number>, line?: number): Promise<void> {
    return this.local.run(async () => {
      const head = await reconcile();
      if (line === undefined && head === this.chainHead && this.watchLine !== 0 && this.nextLine === undefined) return;
      this.chainHead = head;
      this.nextLine = line ?? 'new';
      await this.rewatch();
    });
  }

  /**
   * A full snapshot at `revision` is in the store. The deltas go on as they were: the one it cuts through is
   * uploaded whole, so that every revision stays in a delta and an older full snapshot restores past this one
   * (restore, and ebr, skip a first delta's events the full snapshot already holds). Only where there is no chain
   * of deltas to continue, none yet or one etcd compacted away (`restart`), does the chain start after it.
   */
  coverThrough(revision: number, restart: boolean): Promise<void> {
    return this.local.run(() => this.cover(revision, restart));
  }

  /** Waits (at most `ms`) until the watch has delivered `revision`, by default etcd's current one. */
  async catchUp(ms: number, revision?: number): Promise<void> {
    const target = revision ?? (await memberStatus(this.options.connection, { timeoutMs: 5_000 })).revision;
    const deadline = Date.now() + ms;
    while (this.position < target && Date.now() < deadline) await sleep(50);
  }

  /**
   * Writes the watch into the open delta; stops reading while the open delta is at its limit and cannot be
   * flushed (the spool is full), and while the spool's disk is behind, which holds etcd back.
   */
  private async watchLoop(): Promise<void> {
    const backoff = new Backoff({ baseDelayMs: RETRY_MS, maxDelayMs: MAX_RETRY_MS });
    let broken = false;
    /** The watch broke off since etcd's history was last checked against the store's. */
    let inDoubt = false;
    while (!this.options.signal.aborted) {
      const control = new AbortController();
      this.watchControl = control;
      const signal = AbortSignal.any([this.options.signal, control.signal]);
      try {
        if (inDoubt) {
          inDoubt = false;
          // After a break etcd may hold another history (restored meanwhile). Where it does not hold what this line
          // wrote, the next watch starts a line of its own and the history is checked again (which may restart this
          // writer and abort this watch: it starts over, in no doubt now).
          if (!(await this.etcdHoldsLine())) {
            this.nextLine ??= 'new';
            await this.options.recheckHistory();
          }
        }
        this.takeLine();
        await assertWatchable(this.options.connection, this.resumeRevision());
        for await (const batch of watchRevisions(this.options.connection, this.resumeRevision(), { signal })) {
          // A batch that arrives after a rewatch belongs to a chain position that no longer exists.
          if (signal.aborted) break;
          backoff.reset();
          if (broken) this.logger.info('the watch is back', { revision: batch.revision });
          broken = false;
          this.watchedRevision = batch.revision;
          if (batch.events.length > 0) await this.local.run(() => this.write(batch.events, batch.readBack, signal));
          while ((this.open?.bytes ?? 0) >= this.options.memoryLimit && !signal.aborted) {
            const flushed = await this.local.run(() => this.flushOpen());
            if (flushed) this.options.onFlushed();
            else await sleep(RETRY_MS, undefined, { signal }).catch(() => {});
          }
        }
      } catch (err) {
        if (this.options.signal.aborted) return;
        if (control.signal.aborted) continue;
        if (err instanceof WatchCompactedError) {
          await this.options.onCompacted(err);
          continue;
        }
        this.options.metrics.failures.inc({ error: 'etcd' });
        // What the broken watch gave goes to the spool in its line; the next watch may read another history.
        if (await this.local.run(() => this.flushOpen())) this.options.onFlushed();
        else await this.local.run(() => this.discardOpen());
        if (!broken) {
          this.logger.warn('the watch broke off; resuming with backoff', {
            fromRevision: this.resumeRevision(),
            reason: errorMessage(err),
          });
        }
        broken = true;
        inDoubt = true;
        await backoff.wait(this.options.signal).catch(() => {});
      }
    }
  }

  /** Whether a watch from `revision` reads every event etcd wrote there and after; when etcd cannot say, it does. */
  private async canResume(revision: number): Promise<boolean> {
    return (await deltasGoOnFrom(this.options.connection, revision, this.logger)) !== false;
  }

  /** The line the watch about to start writes to (nextLine). */
  private takeLine(): void {
    if (this.nextLine === undefined) return;
    this.watchLine = this.nextLine === 'new' ? this.options.spool.newLine() : this.nextLine;
    this.nextLine = undefined;
    this.lastWritten = undefined;
  }

  /** Whether etcd holds the newest revision this line wrote as it was written (false when unknown). */
  private async etcdHoldsLine(): Promise<boolean> {
    const last = this.lastWritten;
    if (!last) return false;
    const match = await compareEventsWithEtcd(this.options.connection, last.revision, last.events).catch(
      () => 'unknown',
    );
    return match === 'same';
  }

  private resumeRevision(): number {
    return Math.max(this.chainHead, this.open?.lastRevision ?? 0) + 1;
  }

  /**
   * Writes the events the chain does not cover yet into the open delta, starting one when there is none. `readBack`:
   * etcd wrote them before the watch saw them (WatchBatch.readBack), which the delta records for --to-time.
   */
  private async write(events: DeltaEvent[], readBack: boolean, signal: AbortSignal): Promise<void> {
    // A batch queued before a rewatch belongs to a chain position that no longer exists. With nothing in the store
    // (or spool) there is no chain to continue yet: the full snapshot that starts it comes first (etcd's revision 1
    // holds no event, so a delta from there could never begin).
    if (signal.aborted || this.chainHead === 0) return;
    const fresh =
      events[0].modRevision > this.chainHead ? events : events.filter((e) => e.modRevision > this.chainHead);
    if (fresh.length === 0) return;
    this.open ??= OpenDelta.begin(this.options.spool, this.chainHead + 1, this.options.compression, this.watchLine);
    const broken = this.open.gap(fresh);
    if (broken) {
      this.options.metrics.failures.inc({ error: 'chain' });
      this.logger.error('watched events do not continue the chain; reading them from etcd again', { reason: broken });
      return this.rewatch();
    }
    try {
      await this.open.add(fresh, readBack);
      const revision = fresh[fresh.length - 1].modRevision;
      this.lastWritten = { revision, events: fresh.filter((e) => e.modRevision === revision) };
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

  private async periodicFlush(): Promise<void> {
    if (this.options.signal.aborted) return;
    const flushed = await this.flush();
    if (flushed) this.options.onFlushed();
  }

  private async flushOpen(): Promise<SpooledDelta | undefined> {
    const open = this.open;
    if (!open || this.options.signal.aborted) return undefined;
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
      // that lived long enough sits in the old generation, where V8 lets ~64 MB pile up before it looks.
      collectGarbage('major');
      return delta;
    } catch (err) {
      this.spoolFailed(err);
      await this.rewatch();
      return undefined;
    }
  }

  private async cover(revision: number, restart: boolean): Promise<void> {
    if (revision <= this.chainHead) return;
    // The deltas go on through this snapshot only where etcd still holds what the next one needs; where it does not
    // (compacted past the chain's position: after a fork, say), the chain starts again right after this snapshot.
    if (this.chainHead > 0 && !restart && (this.open || (await this.canResume(this.chainHead + 1)))) return;
    // What the open delta holds continues the chain before this snapshot: it goes to the spool, and what the spool
    // holds is uploaded as it is. When the spool has no room, its revisions are etcd's to give again, if it still can.
    if (this.open && !(await this.flushOpen())) await this.discardOpen();
    this.chainHead = revision;
    // With no chain to write to before this snapshot, the watch read on without writing: it starts over after it.
    if (this.watchedRevision > revision || restart) await this.rewatch();
  }
}
