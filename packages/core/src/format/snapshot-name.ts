import { IntegrityError } from '../common/errors.js';

export type SnapshotKind = 'Full' | 'Incr';

/** Compression as a name suffix says it. ebr reads '', '.gz'; '.zst' is ours alone. */
export type CompressionSuffix = '' | '.gz' | '.Z' | '.zlib' | '.zst';

/** A snapshot object as its name describes it (the store format in docs/concepts.md). */
export interface SnapshotRef {
  kind: SnapshotKind;
  startRevision: number;
  lastRevision: number;
  /** Unix seconds when the snapshot was taken. */
  createdAt: number;
  compression: CompressionSuffix;
  /** A final snapshot, taken on shutdown (ebr's `.final`). */
  final: boolean;
  /** Object name relative to the store prefix, e.g. `v2/Full-00000000-00000042-1795299379.zst`. */
  name: string;
}

const NAME = /^(Full|Incr)-(\d{8,})-(\d{8,})-(\d{1,12})(\.gz|\.Z|\.zlib|\.zst)?(\.final)?$/;

export function snapshotName(ref: Omit<SnapshotRef, 'name'>): string {
  const pad = (n: number) => String(n).padStart(8, '0');
  const base = `${ref.kind}-${pad(ref.startRevision)}-${pad(ref.lastRevision)}-${ref.createdAt}`;
  return `v2/${base}${ref.compression}${ref.final ? '.final' : ''}`;
}

/**
 * Reads a snapshot from its object name: `v2/<name>` or ebr's legacy `v1/Backup-<unix>/<name>`.
 * Returns undefined for objects that are not snapshots, so stray files in a store are ignored.
 */
export function parseSnapshotName(objectName: string): SnapshotRef | undefined {
  const parts = objectName.split('/');
  const base = parts[parts.length - 1];
  const layoutOk =
    (parts.length === 2 && parts[0] === 'v2') ||
    (parts.length === 3 && parts[0] === 'v1' && /^Backup-\d+$/.test(parts[1]));
  const m = layoutOk ? NAME.exec(base) : null;
  if (!m) return undefined;
  const ref: SnapshotRef = {
    kind: m[1] as SnapshotKind,
    startRevision: Number(m[2]),
    lastRevision: Number(m[3]),
    createdAt: Number(m[4]),
    compression: (m[5] ?? '') as CompressionSuffix,
    final: m[6] !== undefined,
    name: objectName,
  };
  if (!Number.isSafeInteger(ref.startRevision) || !Number.isSafeInteger(ref.lastRevision)) return undefined;
  if (ref.lastRevision < ref.startRevision) return undefined;
  return ref;
}

/** A part of a snapshot that ebr uploaded in chunks and then composed: `<snapshot object name>/<part number>`. */
export interface ChunkRef {
  /** The snapshot the chunk is a part of, as its name describes it. */
  snapshot: SnapshotRef;
  name: string;
}

/**
 * ebr uploads a large snapshot to GCS as numbered chunk objects under the snapshot's name, composes them and
 * leaves them for its garbage collector; a killed upload leaves them too. Returns undefined for anything else.
 */
export function parseChunkName(objectName: string): ChunkRef | undefined {
  const slash = objectName.lastIndexOf('/');
  if (slash < 0 || !/^\d{1,12}$/.test(objectName.slice(slash + 1))) return undefined;
  const snapshot = parseSnapshotName(objectName.slice(0, slash));
  return snapshot ? { snapshot, name: objectName } : undefined;
}

/** Orders snapshots as restore reads them: by last revision, a full before a delta ending at the same revision. */
export function compareSnapshots(a: SnapshotRef, b: SnapshotRef): number {
  return (
    a.lastRevision - b.lastRevision ||
    (a.kind === b.kind ? 0 : a.kind === 'Full' ? -1 : 1) ||
    a.createdAt - b.createdAt ||
    (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  );
}

export function assertSnapshotName(objectName: string): SnapshotRef {
  const ref = parseSnapshotName(objectName);
  if (!ref) throw new IntegrityError(`"${objectName}" is not a snapshot name (Kind-%08d-%08d-<unix>[suffix])`);
  return ref;
}
