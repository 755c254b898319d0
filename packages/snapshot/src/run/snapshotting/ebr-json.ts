import type { SnapshotRef } from '@etcd-steward/core/format';

/** A snapshot as ebr's HTTP API describes it (brtypes.Snapshot marshalled by Go's encoding/json). */
export interface EbrSnapshot {
  createdOn: string;
  /** ebr's spelling. */
  immutabilityExpriyTime: string;
  versionID: string | null;
  kind: 'Full' | 'Incr';
  snapDir: string;
  snapName: string;
  prefix: string;
  compressionSuffix: string;
  startRevision: number;
  lastRevision: number;
  isChunk: boolean;
  isFinal: boolean;
}

/** Go's zero time.Time, as encoding/json writes it. */
const GO_ZERO_TIME = '0001-01-01T00:00:00Z';

/** `storePrefix` is the prefix inside the bucket (empty for a local store), as ebr's Prefix begins. */
export function ebrSnapshot(ref: SnapshotRef, storePrefix: string): EbrSnapshot {
  const parts = ref.name.split('/');
  return {
    createdOn: new Date(ref.createdAt * 1000).toISOString().replace('.000Z', 'Z'),
    immutabilityExpriyTime: GO_ZERO_TIME,
    versionID: null,
    kind: ref.kind,
    snapDir: parts.length === 3 ? parts[1] : '',
    snapName: parts[parts.length - 1],
    prefix: `${storePrefix ? `${storePrefix}/` : ''}${parts[0]}/`,
    compressionSuffix: ref.compression,
    startRevision: ref.startRevision,
    lastRevision: ref.lastRevision,
    isChunk: false,
    isFinal: ref.final,
  };
}

/**
 * ebr's GET /snapshot/latest: the newest full snapshot and the deltas after it. Go writes an empty list as
 * null, and so does this, for clients that compare bodies.
 */
export function ebrLatest(
  entries: readonly SnapshotRef[],
  storePrefix: string,
): { fullSnapshot: EbrSnapshot | null; deltaSnapshots: EbrSnapshot[] | null } {
  const fullAt = entries.findLastIndex((e) => e.kind === 'Full');
  const deltas = entries.slice(fullAt + 1).filter((e) => e.kind === 'Incr');
  return {
    fullSnapshot: fullAt >= 0 ? ebrSnapshot(entries[fullAt], storePrefix) : null,
    deltaSnapshots: deltas.length > 0 ? deltas.map((d) => ebrSnapshot(d, storePrefix)) : null,
  };
}
