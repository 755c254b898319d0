import type { SnapshotRef } from '@etcd-steward/core/format';
import { isSpooledFull, type SpooledDelta } from './spool.js';

/**
 * Where the store's chain ends: `head`, the newest revision any snapshot holds, and `deltaHead`, the newest that
 * anything below the newest full snapshot holds (a delta, or an older full snapshot). A full snapshot may end past
 * the deltas: they go on through it (DeltaWriter.coverThrough), and the next delta continues `deltaHead`.
 */
export interface ChainHeads {
  head: number;
  deltaHead: number;
}

/**
 * What becomes of a spooled snapshot, given the chain's heads: `upload` when it adds to the chain (a full snapshot
 * newer than the head; a delta that starts after the store's deltas, no later than right after the head, and
 * reaches past the head or continues the deltas below a newer full snapshot), `covered` when the store holds its
 * revisions already, `gap` when it would leave revisions out or repeat some that the store's deltas hold.
 */
export function spoolFit(delta: SpooledDelta, { head, deltaHead }: ChainHeads): 'upload' | 'covered' | 'gap' {
  const { startRevision: start, lastRevision: last } = delta;
  if (isSpooledFull(delta)) return last > head ? 'upload' : 'covered';
  if (last > head) return start > deltaHead && start <= head + 1 ? 'upload' : 'gap';
  return deltaHead > 0 && start === deltaHead + 1 ? 'upload' : 'covered';
}

/** The heads once `delta` is in the store. */
export function headsAfter(heads: ChainHeads, delta: SpooledDelta): ChainHeads {
  if (!isSpooledFull(delta)) {
    return { head: Math.max(heads.head, delta.lastRevision), deltaHead: Math.max(heads.deltaHead, delta.lastRevision) };
  }
  // A newer full snapshot puts what the store held below it.
  return delta.lastRevision > heads.head ? { head: delta.lastRevision, deltaHead: heads.head } : heads;
}

/** The heads of the snapshots listed (ChainHeads). */
export function headsOf(entries: readonly SnapshotRef[]): ChainHeads {
  const head = entries.reduce((max, e) => Math.max(max, e.lastRevision), 0);
  const newestFull = entries.reduce((max, e) => (e.kind === 'Full' ? Math.max(max, e.lastRevision) : max), 0);
  const deltaHead = entries.reduce(
    (max, e) => (e.kind === 'Incr' || e.lastRevision < newestFull ? Math.max(max, e.lastRevision) : max),
    0,
  );
  return { head, deltaHead };
}
