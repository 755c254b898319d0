import type { CatalogEntry } from './snapshot-catalog.js';

/** Where a restore (or a compaction) should end: the newest state, a revision, or a moment. */
export interface ChainTarget {
  /** Restore exactly this revision. */
  revision?: number;
  /** Restore the state at this moment, by the times the deltas recorded for their events. */
  time?: Date;
}

/** A full snapshot and the deltas that carry it forward, in the order they apply. */
export interface SnapshotChain {
  full: CatalogEntry;
  deltas: CatalogEntry[];
  /** The revision the chain reaches by its names (capped at the target revision, if one was given). */
  lastRevision: number;
  /**
   * Set when the deltas stop before the newest revision the store knows of (and before the target): a delta
   * is missing. `from` is the first revision no delta continues with, `to` the newest revision any snapshot
   * names; restoring this chain loses `from..to`.
   */
  gap?: { from: number; to: number };
  /** For a time target (TimeCut): why `lastRevision` may not be the state at that moment. */
  timeDoubt?: TimeDoubt;
}

/**
 * What the deltas cannot tell about the state at a moment (backup/time-cut.ts). The chain's `lastRevision` is the
 * newest revision known to have been reached by then; the revision after it is either one the sidecar read back
 * after a stretch it did not watch live, or one in a delta that does not say how it came (format/read-back.ts).
 */
export interface TimeDoubt {
  /**
   * The revisions after `lastRevision`, up to `to`, were read back from etcd's history, the first of them at
   * `firstSeenAt` (after the moment): etcd wrote them at some time after `knownAt`, when `lastRevision` was known
   * (its first event's time, or its full snapshot's), so any of them may have been written by the moment. The store
   * cannot tell the state then. Times in nanoseconds.
   */
  readBack?: { knownAt: bigint; to: number; firstSeenAt: bigint };
  /** The delta holding the next revision does not record whether its events came live (ebr's, or older ones). */
  unrecorded?: string;
}

/**
 * Every chain the store offers, the best first: one per full snapshot that can serve the target, newest
 * full first. A caller tries them in turn, so a damaged newest full falls back to the previous one and the
 * longer chain of deltas after it.
 *
 * Deltas join a chain when they continue it: start ≤ reached + 1 and last > reached. Overlaps are tolerated
 * because ebr produces them — a full snapshot may hold more than its name says (etcd#9037: ebr reads the
 * revision before it streams the db), and two leaders may both upload a delta from the same start
 * (ebr#1043) — so the replay skips events at or below the revision already reached. Where several deltas
 * continue the chain, the one reaching furthest wins; a delta ending at or below what the chain already holds
 * (such as ebr's delta that ends where the next full begins) is not needed.
 */
export function planChains(entries: readonly CatalogEntry[], target: ChainTarget = {}): SnapshotChain[] {
  const newest = entries.reduce((max, e) => Math.max(max, e.lastRevision), 0);
  const deltas = entries.filter((e) => e.kind === 'Incr');
  const targetSeconds = target.time ? target.time.getTime() / 1000 : undefined;
  return entries
    .filter((e) => e.kind === 'Full')
    .filter((full) => target.revision === undefined || full.lastRevision <= target.revision)
    .filter((full) => targetSeconds === undefined || full.createdAt <= targetSeconds)
    .sort((a, b) => b.lastRevision - a.lastRevision || b.createdAt - a.createdAt)
    .map((full) => chainFrom(full, deltas, target, targetSeconds, newest));
}

function chainFrom(
  full: CatalogEntry,
  deltas: readonly CatalogEntry[],
  target: ChainTarget,
  targetSeconds: number | undefined,
  newest: number,
): SnapshotChain {
  const chain: CatalogEntry[] = [];
  let reached = full.lastRevision;
  const done = () =>
    (target.revision !== undefined && reached >= target.revision) ||
    (targetSeconds !== undefined && chain.length > 0 && chain[chain.length - 1].createdAt > targetSeconds);
  while (!done()) {
    let next: CatalogEntry | undefined;
    for (const d of deltas) {
      if (d.startRevision > reached + 1 || d.lastRevision <= reached) continue;
      if (
        !next ||
        d.lastRevision > next.lastRevision ||
        (d.lastRevision === next.lastRevision && d.createdAt > next.createdAt)
      ) {
        next = d;
      }
    }
    if (!next) break;
    chain.push(next);
    reached = next.lastRevision;
  }
  const lastRevision = target.revision === undefined ? reached : Math.min(reached, target.revision);
  const wanted = target.revision ?? newest;
  const stoppedByTime = targetSeconds !== undefined && done();
  const gap = reached < wanted && !stoppedByTime ? { from: reached + 1, to: wanted } : undefined;
  return { full, deltas: chain, lastRevision, ...(gap ? { gap } : {}) };
}
