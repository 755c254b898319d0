import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OperationError } from '../common/errors.js';
import { groupRevisions } from '../format/delta-revisions.js';
import { parseRfc3339Nanos } from '../format/event-time.js';
import type { SnapStore } from '../store/snapstore.js';
import { fetchDelta, readDeltaEvents } from './fetch-delta.js';
import type { CatalogEntry } from './snapshot-catalog.js';
import type { SnapshotChain } from './snapshot-chain.js';

/** What one delta says about a moment: its last revision recorded at or before it, and whether it goes past it. */
interface DeltaCut {
  lastAtOrBefore?: number;
  passes: boolean;
}

/**
 * Finds where a chain stops for a point in time: after the last revision whose first event was recorded at or
 * before `nanos` (revisions are never split), to the nanosecond. The restore then replays to exactly that
 * revision, so that the plan a dry run prints and the restore are one computation.
 *
 * Only deltas that may hold a later event are read: one whose name says it was taken a whole second or more
 * before the moment holds none (its events were recorded before it was written). Each delta is read once
 * for all the chains of a plan.
 */
export class TimeCut {
  private readonly cuts = new Map<string, Promise<DeltaCut>>();

  constructor(
    private readonly store: SnapStore,
    private readonly nanos: bigint,
    private readonly options: { signal?: AbortSignal } = {},
  ) {}

  /** The chain ending at the moment: its last revision and only the deltas it needs for it. */
  async apply(chain: SnapshotChain): Promise<SnapshotChain> {
    let reached = chain.full.lastRevision;
    const deltas: CatalogEntry[] = [];
    for (const delta of chain.deltas) {
      const cut =
        BigInt(delta.createdAt + 1) * 1_000_000_000n <= this.nanos
          ? { lastAtOrBefore: delta.lastRevision, passes: false }
          : await this.cut(delta);
      if (cut.lastAtOrBefore !== undefined && cut.lastAtOrBefore > reached) {
        reached = cut.lastAtOrBefore;
        deltas.push(delta);
      }
      if (cut.passes) return { ...chain, deltas, lastRevision: reached, gap: undefined };
    }
    return { ...chain, deltas, lastRevision: reached };
  }

  private cut(delta: CatalogEntry): Promise<DeltaCut> {
    let cut = this.cuts.get(delta.name);
    if (!cut) {
      cut = this.read(delta);
      this.cuts.set(delta.name, cut);
    }
    return cut;
  }

  private async read(delta: CatalogEntry): Promise<DeltaCut> {
    const label = `${this.store.location}/${delta.name}`;
    const dir = await mkdtemp(join(tmpdir(), 'etcd-restore-time-'));
    try {
      const file = join(dir, 'delta.json');
      await fetchDelta(this.store, delta, file, { signal: this.options.signal });
      let lastAtOrBefore: number | undefined;
      for await (const rev of groupRevisions(readDeltaEvents(file, delta, label))) {
        const time = parseRfc3339Nanos(rev.events[0].time);
        if (time === undefined) {
          throw new OperationError(
            `${label}: revision ${rev.revision} has no recorded time ("${rev.events[0].time}"), so --to-time cannot place it`,
          );
        }
        if (time > this.nanos) return { lastAtOrBefore, passes: true };
        lastAtOrBefore = rev.revision;
      }
      return { lastAtOrBefore, passes: false };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}
