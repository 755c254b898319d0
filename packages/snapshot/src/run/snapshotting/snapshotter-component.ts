import { rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { ForeignHistoryError, type SavedFullSnapshot } from '@etcd-steward/core/backup';
import { Backoff, errorMessage, type Logger } from '@etcd-steward/core/common';
import type { SnapshotRef } from '@etcd-steward/core/format';
import { cleanupIncompleteUploads, type SnapStore } from '@etcd-steward/core/store';
import type { Component, ComponentContext, Route } from '../component.js';
import { LateStore } from '../late-store.js';
import { type Leadership, NotLeaderError, type Role } from '../leadership/leadership.js';
import { Serial } from '../serial.js';
import type { SavedSnapshot, Snapshotter } from '../sidecar-part.js';
import { FencedStore } from './fenced-store.js';
import { SecondWriterCheck } from './second-writer.js';
import { snapshotRoutes } from './snapshot-api.js';
import { SnapshotMetrics } from './snapshot-metrics.js';
import { SnapshotTerm, type SnapshotTermOptions } from './snapshot-term.js';

export interface SnapshotterComponentOptions
  extends Omit<SnapshotTermOptions, 'metrics' | 'logger' | 'state' | 'etcdRevision' | 'onRefused' | 'provenDifferent'> {
  leadership: Leadership;
  /** Take a final full snapshot (ebr's `.final`) on shutdown. */
  finalSnapshot: boolean;
  /** How long a new leader waits before it writes, so that the old leader's last upload has ended. */
  handoverDelayMs: number;
  /** How long shutdown waits for the watch to reach etcd's current revision. */
  catchUpMs: number;
  /** The store's prefix inside its bucket, as ebr's JSON shows it. */
  storePrefix: string;
  /** On becoming leader, multipart uploads begun longer ago than this are aborted. */
  incompleteUploadMaxAgeMs: number;
}

const RETRY_MS = 1_000;
const MAX_RETRY_MS = 30_000;

/**
 * Runs a SnapshotTerm for each term in which this sidecar leads: started when its member becomes the leader
 * (after the hand-over delay, in a cluster of several members), stopped the moment it is not. Writes go through
 * a FencedStore, so even a term that has not noticed yet cannot write once another sidecar leads.
 */
export class SnapshotterComponent implements Component, Snapshotter {
  readonly name = 'snapshotter';
  readonly metrics: SnapshotMetrics;
  readonly routes: readonly Route[];
  private term?: SnapshotTerm;
  private readonly transitions = new Serial();
  private waiting?: AbortController;
  private unsubscribe?: () => void;
  private stopping = false;
  /** Nothing is known of the store until a term has looked: until then a full snapshot counts as owed. */
  private readonly state = {
    lastFullFailed: false,
    fullRequired: true,
    fullTooLargeToSpool: false,
    storeNotWritable: false,
  };
  private readonly store: SnapStore;
  private readonly writers: SecondWriterCheck;
  private readonly logger: Logger;
  /** false while a term cannot start because the store does not answer; a running term tracks its uploads. */
  private storeReachable = true;
  /** Why no term can start: the store holds a history etcd does not continue (ForeignHistoryError). */
  private historyRefused?: string;
  /**
   * The store's snapshots a refusal proved to differ from etcd's history: they stay refused for as long as this
   * sidecar runs, though etcd may since compact what proved it (and the next check could then not tell).
   */
  private readonly provenDifferent = new Set<string>();

  constructor(
    private readonly options: SnapshotterComponentOptions,
    context: ComponentContext,
  ) {
    this.logger = context.logger;
    this.writers = new SecondWriterCheck(new FencedStore(options.store, () => options.leadership.confirm()), context);
    this.store = this.writers;
    this.metrics = new SnapshotMetrics(context.registry, () => {
      const term = this.term?.gauges();
      return {
        spoolDeltas: () => options.spool.depth,
        spoolBytes: () => options.spool.bytes,
        bufferedBytes: () => 0,
        watchLagRevisions: () => undefined,
        deltaRequired: () => options.spool.depth > 0,
        historyRefused: () => this.historyRefused !== undefined,
        ...term,
        // A store that answers but refused the leader's last full snapshot (read-only, no permission) cannot be
        // written: for the alert on this gauge, that is as unreachable as a store that does not answer.
        storeReachable: () =>
          !(options.leadership.role !== 'follower' && this.state.storeNotWritable) &&
          (term ? term.storeReachable() : this.storeReachable),
        // The leader's sidecar owes the snapshots; a follower owes none.
        fullRequired: () => options.leadership.role !== 'follower' && this.state.fullRequired,
      };
    });
    this.routes = snapshotRoutes(this, options.store, options.storePrefix);
  }

  async start(): Promise<void> {
    this.unsubscribe = this.options.leadership.onChange((role) => this.follow(role));
    this.follow(this.options.leadership.role);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.unsubscribe?.();
    this.waiting?.abort();
    await this.transitions.run(async () => {
      const term = this.term;
      this.term = undefined;
      await term?.stop({ final: this.options.finalSnapshot, catchUpMs: this.options.catchUpMs });
    });
    // The spool and the scratch folder are this component's alone (snapshotting-part.ts opens and clears them).
    this.options.spool.close();
    await rm(this.options.tempDir, { recursive: true, force: true });
  }

  healthy(): boolean {
    const writing = this.term?.healthy() ?? (this.storeReachable && this.historyRefused === undefined);
    return writing && this.writers.healthy();
  }

  /** The oldest revision this sidecar's deltas still need from etcd's history (a compaction must keep it). */
  get neededRevision(): number | undefined {
    return this.term?.neededRevision;
  }

  /** Whether this sidecar takes the snapshots right now. */
  get leading(): boolean {
    return this.term !== undefined;
  }

  /** Leads, but has not started taking snapshots yet (hand-over delay, start-up). */
  get starting(): boolean {
    return this.term === undefined && this.options.leadership.role === 'leader';
  }

  async full(final: boolean): Promise<SavedFullSnapshot> {
    if (!this.term) throw new NotLeaderError();
    return this.term.triggerFull(final);
  }

  onSaved(listener: (saved: SavedSnapshot) => void): () => void {
    return this.metrics.onSaved(listener);
  }

  async delta(): Promise<SnapshotRef | undefined> {
    if (!this.term) throw new NotLeaderError();
    return this.term.triggerDelta();
  }

  /**
   * A term begins when the member leads and ends when another does. While etcd cannot be asked ('unknown'),
   * a running term goes on watching and spooling: its uploads still ask etcd first (the fence), and a brief
   * hiccup then costs no hand-over delay.
   */
  private follow(role: Role): void {
    if (this.stopping) return;
    if (role === 'leader') {
      void this.transitions.run(() => this.beginTerm());
    } else if (role === 'follower') {
      this.waiting?.abort();
      void this.transitions.run(() => this.endTerm());
    }
  }

  private async beginTerm(): Promise<void> {
    if (this.term || this.stopping || this.options.leadership.role !== 'leader') return;
    const waiting = new AbortController();
    this.waiting = waiting;
    try {
      if (await this.othersMayWrite()) {
        this.logger.info("leading: waiting for the previous leader's last upload to end", {
          seconds: this.options.handoverDelayMs / 1000,
        });
        await sleep(this.options.handoverDelayMs, undefined, { signal: waiting.signal });
      }
      // Before this term's own first upload: what is incomplete now was left by a writer that stopped.
      await this.abortIncompleteUploads();
      const backoff = new Backoff({ baseDelayMs: RETRY_MS, maxDelayMs: MAX_RETRY_MS });
      this.writers.beginTerm();
      while (!waiting.signal.aborted) {
        const term = new SnapshotTerm({
          ...this.options,
          store: this.store,
          metrics: this.metrics,
          logger: this.logger,
          state: this.state,
          etcdRevision: () => this.options.leadership.status?.revision,
          provenDifferent: this.provenDifferent,
          onRefused: (err) => void this.transitions.run(() => this.refuse(term, err)),
        });
        try {
          await term.start();
          this.term = term;
          // A term that started with its chain in the spool says itself when the store is back.
          if (!this.storeReachable && term.gauges().storeReachable()) this.logger.info('the store is reachable again');
          this.storeReachable = true;
          this.historyRefused = undefined;
          this.logger.info('taking snapshots: this sidecar leads');
          return;
        } catch (err) {
          await term.stop();
          if (err instanceof ForeignHistoryError) {
            for (const name of err.different) this.provenDifferent.add(name);
            // Once until it changes; the store may be fixed (or etcd restored from it) meanwhile.
            if (this.historyRefused !== err.message)
              this.logger.error('refusing to take snapshots', { reason: err.message });
            this.historyRefused = err.message;
            await backoff.wait(waiting.signal);
            continue;
          }
          this.metrics.failures.inc({ error: 'store' });
          // Once per outage. Only when no full snapshot could be spooled (etcd unreachable too, or the spool too
          // small): etcd keeps the changes meanwhile (or a full snapshot covers them, if it compacts).
          if (this.storeReachable) {
            this.logger.warn('cannot start taking snapshots: the store does not answer; retrying with backoff', {
              reason: errorMessage(err),
            });
          }
          this.storeReachable = false;
          await backoff.wait(waiting.signal);
        }
      }
    } catch {
      // leadership moved on while waiting
    }
  }

  /**
   * A running term found the store holding another history (once the store answered): it ends, and terms start
   * again, each refused until the store or etcd changes, as at a start.
   */
  private async refuse(term: SnapshotTerm, err: ForeignHistoryError): Promise<void> {
    if (this.term !== term) return;
    this.logger.error('refusing to take snapshots', { reason: err.message });
    this.historyRefused = err.message;
    for (const name of err.different) this.provenDifferent.add(name);
    await this.endTerm();
    void this.transitions.run(() => this.beginTerm());
  }

  private async endTerm(): Promise<void> {
    const term = this.term;
    if (!term) return;
    this.term = undefined;
    this.logger.info('not leading: stopping snapshots; the leader takes them');
    await term.stop();
  }

  /**
   * Best effort: aborts the multipart uploads (S3) that writers killed mid-upload left, whose parts are billed
   * but never seen. A failure is logged and the term goes on; the next term tries again.
   */
  private async abortIncompleteUploads(): Promise<void> {
    try {
      const { store } = this.options;
      const opened = store instanceof LateStore ? await store.store() : store;
      const aborted = await cleanupIncompleteUploads(opened, this.options.incompleteUploadMaxAgeMs);
      if (aborted) this.logger.info('aborted incomplete uploads that stopped writers left in the store', { aborted });
    } catch (err) {
      this.logger.warn('cannot abort incomplete uploads in the store; trying again at the next leadership', {
        reason: errorMessage(err),
      });
    }
  }

  /** In a cluster of one there is no other sidecar whose uploads could still be in flight. */
  private async othersMayWrite(): Promise<boolean> {
    try {
      return (await this.options.leadership.memberCount()) > 1;
    } catch {
      return true;
    }
  }
}
