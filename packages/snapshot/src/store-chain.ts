import { listSnapshots } from '@etcd-steward/core/backup';
import type { Logger } from '@etcd-steward/core/common';
import type { SnapshotRef } from '@etcd-steward/core/format';
import type { SnapStore } from '@etcd-steward/core/store';
import type { DeltaWriter } from './delta-writer.js';
import type { SnapshotMetrics } from './snapshot-metrics.js';
import { isSpooledFull, type Spool, type SpooledDelta } from './spool.js';

/** What resynchronisation keeps of the spool: the chain it continues, and what goes. */
export interface SpoolReconciliation {
  /** The chain's new head: the store's, or the last revision of the spooled snapshots that continue it. */
  head: number;
  /** In spool order. `chainRevision` is set for a delta the store does not cover but that does not fit either. */
  drop: Array<{ delta: SpooledDelta; chainRevision?: number }>;
}

/**
 * Which spooled snapshots continue the store's chain, which ends at `storeHead`: the deltas that continue it,
 * or a spooled full snapshot newer than it and the deltas that continue that. Those the store already covers
 * go; those that do not fit go too, their revisions come again from etcd.
 */
export function reconcileSpool(storeHead: number, spooled: readonly SpooledDelta[]): SpoolReconciliation {
  let head = storeHead;
  const drop: SpoolReconciliation['drop'] = [];
  for (const delta of spooled) {
    if (delta.lastRevision <= storeHead) {
      drop.push({ delta });
    } else if (delta.startRevision === head + 1 || isSpooledFull(delta)) {
      // A spooled full snapshot newer than the store's starts a chain of its own.
      head = delta.lastRevision;
    } else {
      drop.push({ delta, chainRevision: head });
    }
  }
  return { head, drop };
}

/** The last revision of the newest snapshot listed. */
function headOf(entries: readonly SnapshotRef[]): number {
  return entries.reduce((max, e) => Math.max(max, e.lastRevision), 0);
}

export interface StoreChainOptions {
  /** Written to only while this sidecar leads (a FencedStore). */
  store: SnapStore;
  spool: Spool;
  writer: DeltaWriter;
  metrics: SnapshotMetrics;
  logger: Logger;
  /** The store lost its full snapshots under the sidecar: the deltas have no base. */
  onBaseLost(): void;
}

/**
 * The chain as the store holds it: its head (the newest snapshot's last revision) and newest full snapshot,
 * read from a listing each time it matters, and the resynchronisation of the local chain with it.
 */
export class StoreChain {
  /** The store's newest full snapshot, as last listed or stored. */
  lastFull?: SnapshotRef;

  constructor(private readonly options: StoreChainOptions) {}

  async head(): Promise<number> {
    const entries = await listSnapshots(this.options.store);
    this.noteFull(entries);
    return headOf(entries);
  }

  /**
   * Starts the chain from what the store holds, followed by what the spool holds that continues it
   * (reconcileSpool). Then the watch starts over right after the new head.
   */
  async resync(): Promise<void> {
    const { spool, logger } = this.options;
    const entries = await listSnapshots(this.options.store);
    const storeHead = headOf(entries);
    this.noteFull(entries);
    this.report(entries);
    await this.options.writer.restart(async () => {
      const { head, drop } = reconcileSpool(storeHead, spool.list());
      for (const { delta, chainRevision } of drop) {
        if (chainRevision !== undefined) {
          logger.warn('dropping a spooled delta that does not continue the chain; etcd still has its revisions', {
            delta: delta.name,
            chainRevision,
          });
        }
        await spool.remove(delta);
      }
      logger.info('chain resumes', { afterRevision: head, storeRevision: storeHead, spooled: spool.depth });
      return head;
    });
  }

  /**
   * Keeps track of the store's newest full snapshot. A store that lost its full snapshots under the sidecar (emptied,
   * or holding deltas only) gives the deltas no base: a new chain starts with a full snapshot, now.
   */
  private noteFull(entries: readonly SnapshotRef[]): void {
    const newest = entries.findLast((e) => e.kind === 'Full');
    if (!newest && this.lastFull) this.options.onBaseLost();
    this.lastFull = newest;
  }

  private report(entries: Array<SnapshotRef>): void {
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
