import {
  type CatalogEntry,
  checkStoreHistory,
  ForeignHistoryError,
  forkFolder,
  listSnapshots,
  setAside,
} from '@etcd-steward/core/backup';
import { errorMessage, type Logger } from '@etcd-steward/core/common';
import type { EtcdConnection } from '@etcd-steward/core/etcd';
import type { SnapshotRef } from '@etcd-steward/core/format';
import { ObjectNotFoundError, type SnapStore } from '@etcd-steward/core/store';
import type { DeltaWriter } from './delta-writer.js';
import type { SnapshotMetrics } from './snapshot-metrics.js';
import { type ChainHeads, headsAfter, headsOf, resumeRevision, spoolFit } from './spool/chain-heads.js';
import type { Spool, SpooledDelta } from './spool/spool.js';
import { setAsideSpooled, unprovenSpool } from './spool/spool-history.js';
import { deltasGoOnFrom } from './watch-start.js';

/** How often a resynchronisation lists the store again when it changed under the history check. */
const RELISTS = 3;

/** What resynchronisation keeps of the spool: the chain it continues, and what goes. */
export interface SpoolReconciliation {
  /** The chain's new heads: the store's, moved on by the spooled snapshots that continue it. */
  heads: ChainHeads;
  /** In spool order. `chainRevision` is set for a delta the store does not cover but that does not fit either. */
  drop: Array<{ delta: SpooledDelta; chainRevision?: number }>;
}

/**
 * Which spooled snapshots continue the store's chain (spoolFit): a spooled full snapshot newer than the store's
 * head starts a chain of its own. Those the store already covers go; those that do not fit go too, their
 * revisions come again from etcd.
 */
export function reconcileSpool(store: ChainHeads, spooled: readonly SpooledDelta[]): SpoolReconciliation {
  let heads = store;
  const drop: SpoolReconciliation['drop'] = [];
  for (const delta of spooled) {
    const fit = spoolFit(delta, heads);
    if (fit === 'upload') heads = headsAfter(heads, delta);
    else drop.push(fit === 'gap' ? { delta, chainRevision: heads.head } : { delta });
  }
  return { heads, drop };
}

export interface StoreChainOptions {
  /** Written to only while this sidecar leads (a FencedStore). */
  store: SnapStore;
  /** This sidecar's own member: its history is compared with the store's. */
  connection: EtcdConnection;
  /** Scratch space (a delta read to compare its last revision). */
  tempDir: string;
  spool: Spool;
  writer: DeltaWriter;
  metrics: SnapshotMetrics;
  logger: Logger;
  /** The store lost its full snapshots under the sidecar: the deltas have no base. */
  onBaseLost(): void;
  /** Snapshots this sidecar found to differ from etcd's history before (HistoryCheckOptions.provenDifferent). */
  provenDifferent: ReadonlySet<string>;
}

/**
 * The chain as the store holds it: its head (the newest snapshot's last revision) and newest full snapshot,
 * read from a listing each time it matters, and the resynchronisation of the local chain with it.
 */
export class StoreChain {
  /** The store's newest full snapshot, as last listed or stored. */
  lastFull?: SnapshotRef;
  /** The last resynchronisation found etcd's history forked from the store's: a full snapshot is owed at once. */
  forked = false;
  /** A resynchronisation checked the store's history against etcd's in this term: the spool may be uploaded. */
  private checked = false;
  /** The spool's history lines proven to be etcd's in this term (spool-history.ts). */
  private readonly provenLines = new Set<number>();

  constructor(private readonly options: StoreChainOptions) {}

  async heads(): Promise<ChainHeads> {
    const entries = await listSnapshots(this.options.store);
    this.noteFull(entries);
    return headsOf(entries);
  }

  /**
   * Starts the chain from what the store holds, once etcd's history is found to continue it (historyOf), followed
   * by what the spool holds that etcd's history holds too (setAsideUnproven) and that continues it (reconcileSpool).
   * Then the watch starts over right after the new head, or goes on where that is where it writes (DeltaWriter.restart).
   */
  async resync(): Promise<void> {
    const { spool, logger } = this.options;
    this.forked = false;
    const entries = await this.listedHistory();
    await this.setAsideUnproven();
    const storeHeads = headsOf(entries);
    this.noteFull(entries);
    this.report(entries);
    this.checked = true;
    await this.options.writer.restart(async () => {
      const { heads, drop } = reconcileSpool(storeHeads, spool.list());
      for (const { delta, chainRevision } of drop) {
        if (chainRevision !== undefined) {
          logger.warn('dropping a spooled delta that does not continue the chain; etcd still has its revisions', {
            delta: delta.name,
            chainRevision,
          });
        }
        await spool.remove(delta);
      }
      const after = await resumeRevision(heads, (revision) => this.etcdHolds(revision));
      logger.info('chain resumes', { afterRevision: after, storeRevision: storeHeads.head, spooled: spool.depth });
      return after;
    });
  }

  /**
   * The store's snapshots that etcd's history continues (historyOf), listed again when one was gone by the time the
   * check read it: etcd-gc or etcd-compact changed the store meanwhile, which is no outage of the store.
   */
  private async listedHistory(): Promise<CatalogEntry[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.historyOf(await listSnapshots(this.options.store));
      } catch (err) {
        if (!(err instanceof ObjectNotFoundError) || attempt >= RELISTS) throw err;
        this.options.logger.info(
          'the store changed while its history was checked (gc or compaction); listing it again',
          {
            reason: errorMessage(err),
          },
        );
      }
    }
  }

  /** Whether etcd still holds `revision` whole (it compacted below it), so that a watch from it misses nothing. */
  private async etcdHolds(revision: number): Promise<boolean> {
    return (await deltasGoOnFrom(this.options.connection, revision, this.options.logger)) === true;
  }

  /** etcd may hold another history than when the store's was last checked (its watch broke off). */
  doubt(): void {
    this.checked = false;
  }

  /**
   * Before an upload: no snapshot leaves the spool before the store's history was checked against etcd's (a term
   * that started while the store did not answer does it once the store answers), nor one that etcd's history does
   * not hold (a line of the spool written before etcd was restored); setting one aside restarts the chain. Whether
   * it resynchronised.
   */
  async prepareUpload(): Promise<boolean> {
    if (this.checked && (await this.setAsideUnproven()) === 0) return false;
    await this.resync();
    return true;
  }

  /** Sets aside the spooled snapshots etcd's history does not hold (unprovenSpool); how many. */
  private async setAsideUnproven(): Promise<number> {
    const { store, spool, connection, tempDir, writer, metrics, logger } = this.options;
    const unproven = await unprovenSpool({
      spool,
      connection,
      currentLine: writer.line,
      proven: this.provenLines,
      scratchDir: tempDir,
    });
    if (unproven.length === 0) return 0;
    const names = unproven.map((e) => e.name);
    const folder = await setAsideSpooled(store, spool, unproven);
    logger.error(
      "spooled snapshots hold revisions etcd's history does not (etcd restored since they were written, or its history compacted before they could be compared): set aside, never uploaded into the chain",
      { setAside: names, to: folder },
    );
    metrics.historyForks.inc();
    return unproven.length;
  }

  /**
   * What of the store etcd's history continues. A fork (etcd was restored to an earlier revision) sets the store's
   * snapshots past the revision both share aside under forks/ (the spool's are proven on their own: resync), and
   * owes a full snapshot at once; the deltas go on from the shared revision, in etcd's new history.
   * A store that holds none of etcd's history (another cluster's, or one from before this cluster was created) is
   * refused: ForeignHistoryError, and nothing is written to it.
   */
  private async historyOf(entries: CatalogEntry[]): Promise<CatalogEntry[]> {
    const { store, connection, tempDir, metrics, logger } = this.options;
    const { provenDifferent } = this.options;
    const verdict = await checkStoreHistory({ store, entries, connection, scratchDir: tempDir, provenDifferent });
    if (verdict.kind === 'unknown') {
      logger.warn("cannot tell whether etcd continues the store's history; going on with the store's chain", {
        reason: verdict.reason,
      });
    }
    if (verdict.kind === 'foreign') throw new ForeignHistoryError(store.location, verdict);
    if (verdict.kind !== 'forked') return entries;
    const folder = forkFolder(verdict.commonRevision);
    logger.error(
      "etcd's history left the store's (a restore to an earlier revision?): setting the later snapshots aside and taking a full snapshot",
      {
        commonRevision: verdict.commonRevision,
        etcdRevision: verdict.etcdRevision,
        setAside: verdict.abandoned.map((e) => e.name),
        to: folder,
      },
    );
    metrics.historyForks.inc();
    await setAside(store, verdict.commonRevision, folder, { logger });
    this.forked = true;
    return listSnapshots(store);
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
