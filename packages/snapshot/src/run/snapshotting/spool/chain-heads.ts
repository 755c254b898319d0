import type { SnapshotRef } from '@etcd-steward/core/format';
import { isSpooledFull, type SpooledDelta } from './spool.js';

/**
 * Where the store's chain ends: `head`, the newest revision any snapshot holds; `deltaHead`, where the deltas end
 * (the newest delta's last revision, 0 when the store holds none); `fullsAfter`, the full snapshots past
 * `deltaHead`, oldest first. Deltas go on through full snapshots (DeltaWriter.coverThrough), so the next delta
 * continues `deltaHead` whatever full snapshots were taken since; only a chain that etcd's compaction broke off
 * starts again right after a full snapshot.
 */
export interface ChainHeads {
  head: number;
  deltaHead: number;
  fullsAfter: number[];
}

/**
 * What becomes of a spooled snapshot, given the chain's heads: `upload` when it adds to the chain (a full snapshot
 * newer than the head; a delta that starts right after the deltas' end, or right after a full snapshot past it),
 * `covered` when the store holds its revisions already, `gap` when it would leave revisions out or repeat some that
 * the store's deltas hold.
 */
export function spoolFit(delta: SpooledDelta, heads: ChainHeads): 'upload' | 'covered' | 'gap' {
  const { startRevision: start, lastRevision: last } = delta;
  if (isSpooledFull(delta)) return last > heads.head ? 'upload' : 'covered';
  if (continues(start, heads)) return 'upload';
  return last > heads.head ? 'gap' : 'covered';
}

/** Whether a delta from `start` continues the chain: right after its deltas, or after a full snapshot past them. */
function continues(start: number, { deltaHead, fullsAfter }: ChainHeads): boolean {
  return (deltaHead > 0 && start === deltaHead + 1) || fullsAfter.includes(start - 1);
}

/** The heads once `delta` is in the store. */
export function headsAfter(heads: ChainHeads, delta: SpooledDelta): ChainHeads {
  if (isSpooledFull(delta)) {
    if (delta.lastRevision <= heads.head) return heads;
    return { ...heads, head: delta.lastRevision, fullsAfter: [...heads.fullsAfter, delta.lastRevision] };
  }
  const deltaHead = Math.max(heads.deltaHead, delta.lastRevision);
  return {
    head: Math.max(heads.head, deltaHead),
    deltaHead,
    fullsAfter: heads.fullsAfter.filter((r) => r > deltaHead),
  };
}

/** The heads of the snapshots listed (ChainHeads). */
export function headsOf(entries: readonly SnapshotRef[]): ChainHeads {
  const head = entries.reduce((max, e) => Math.max(max, e.lastRevision), 0);
  const deltaHead = entries.reduce((max, e) => (e.kind === 'Incr' ? Math.max(max, e.lastRevision) : max), 0);
  const fullsAfter = [
    ...new Set(entries.filter((e) => e.kind === 'Full' && e.lastRevision > deltaHead).map((e) => e.lastRevision)),
  ].sort((a, b) => a - b);
  return { head, deltaHead, fullsAfter };
}

/**
 * Where the watch goes on from after a resynchronisation: the deltas' end, so that the next delta covers every
 * revision up to and through the full snapshots taken since (a fallback past a damaged newest full snapshot, and
 * `--to-revision` between two of them, need those revisions in a delta); where etcd no longer holds the revision
 * after it (`holds`: the chain broke off there and started again at a full snapshot), right after the oldest full
 * snapshot past it that etcd still holds the next revision of; with no delta in the store, or none of those, the head.
 */
export async function resumeRevision(
  heads: ChainHeads,
  holds: (revision: number) => Promise<boolean>,
): Promise<number> {
  const candidates = [...(heads.deltaHead > 0 ? [heads.deltaHead] : []), ...heads.fullsAfter];
  for (const revision of candidates) {
    if (revision >= heads.head) break;
    if (await holds(revision + 1)) return revision;
  }
  return heads.head;
}
