import { StoreLockedError } from '@etcd-steward/core/backup';
import { errorMessage, type Logger } from '@etcd-steward/core/common';
import {
  FullVerdicts,
  type PruneReport,
  pruneStore,
  type RetentionPolicy,
  reportRows,
  summarize,
} from '@etcd-steward/core/retention';
import type { SnapStore } from '@etcd-steward/core/store';
import { Counter } from 'prom-client';
import type { Component, ComponentContext } from '../component.js';
import type { Leadership } from '../leadership/leadership.js';

export interface GarbageCollectorOptions {
  store: SnapStore;
  leadership: Leadership;
  /** Time between runs; the first run comes one period after start, as in ebr. */
  periodMs: number;
  policy: RetentionPolicy;
  incompleteUploadMaxAgeMs: number;
}

/** The store lock's expiry while a run holds it (renewed every third of it). */
const LOCK_TTL_MS = 120_000;

/**
 * `--garbage-collection-period`: etcd-gc's retention, run by the leader's sidecar every period (ebr's garbage
 * collector). Runs never overlap, one another or another gc or compaction on the store (the store lock); a run
 * that finds the store locked waits for the next period.
 */
export class GarbageCollectorComponent implements Component {
  readonly name = 'garbage-collector';
  private readonly logger: Logger;
  private readonly collected: Counter<'kind' | 'succeeded'>;
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;
  private readonly controller = new AbortController();
  /** Each full snapshot is downloaded and checked once, not at every run (full-verdicts.ts). */
  private readonly verdicts = new FullVerdicts();

  constructor(
    private readonly options: GarbageCollectorOptions,
    context: ComponentContext,
  ) {
    this.logger = context.logger;
    this.collected = new Counter({
      name: 'etcdbr_snapshot_gc_total',
      help: 'Total number of garbage collected snapshots.',
      labelNames: ['kind', 'succeeded'],
      registers: [context.registry],
    });
  }

  async start(): Promise<void> {
    this.timer = setInterval(() => {
      if (this.running || this.options.leadership.role !== 'leader') return;
      this.running = this.runOnce().finally(() => {
        this.running = undefined;
      });
    }, this.options.periodMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.controller.abort(new Error('the sidecar stops'));
    await this.running;
  }

  /** One run; what went wrong is logged, never thrown: the next period tries again. */
  async runOnce(): Promise<PruneReport | undefined> {
    try {
      const report = await pruneStore(this.options.store, {
        policy: this.options.policy,
        dryRun: false,
        concurrency: 8,
        attempts: 3,
        lockTtlMs: LOCK_TTL_MS,
        incompleteUploadMaxAgeMs: this.options.incompleteUploadMaxAgeMs,
        logger: this.logger,
        signal: this.controller.signal,
        purpose: 'etcd-snapshot garbage collector',
        verdicts: this.verdicts,
      });
      for (const row of reportRows(report)) {
        if (row.result === 'deleted' || row.result === 'failed') {
          const kind = row.kind === 'chunk' ? 'Chunk' : row.kind;
          this.collected.inc({ kind, succeeded: String(row.result === 'deleted') });
        }
      }
      const summary = summarize(report);
      this.logger.info('garbage collection done', {
        deleted: summary.deleted.objects,
        deletedBytes: summary.deleted.bytes,
        kept: summary.kept.objects,
        failed: summary.failed.objects,
        immutable: summary.immutable.objects,
      });
      return report;
    } catch (err) {
      if (this.controller.signal.aborted) return undefined;
      if (err instanceof StoreLockedError) this.logger.info('garbage collection skipped', { reason: err.message });
      else this.logger.warn('garbage collection failed', { reason: errorMessage(err) });
      return undefined;
    }
  }
}
