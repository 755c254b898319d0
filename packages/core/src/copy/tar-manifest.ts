import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import { IntegrityError } from '../common/errors.js';
import { parseSnapshotName } from '../format/snapshot-name.js';
import { checkMetadata } from '../store/metadata.js';

/** The first entry of an exported tar file; the snapshots follow as `objects/<object name>`. */
export const MANIFEST_ENTRY = 'etcd-copy-backups.json';
export const OBJECTS_FOLDER = 'objects/';
const FORMAT = 'etcd-copy-backups/1';
/** A manifest of a million snapshots stays well below this; anything larger is not ours. */
export const MAX_MANIFEST_BYTES = 64 << 20;

/** One snapshot of the tar file: its name, size, revisions and the metadata a copy carries (sha256, db size). */
export interface ManifestObject {
  name: string;
  size: number;
  kind: 'Full' | 'Incr';
  startRevision: number;
  lastRevision: number;
  metadata: Record<string, string>;
}

export interface TarManifest {
  format: typeof FORMAT;
  /** The store the snapshots came from (no credentials). */
  source: string;
  createdAt: string;
  objects: ManifestObject[];
}

export function buildManifest(
  source: string,
  objects: Array<{ entry: CatalogEntry; metadata: Record<string, string> }>,
): TarManifest {
  return {
    format: FORMAT,
    source,
    createdAt: new Date().toISOString(),
    objects: objects.map(({ entry, metadata }) => ({
      name: entry.name,
      size: entry.size,
      kind: entry.kind,
      startRevision: entry.startRevision,
      lastRevision: entry.lastRevision,
      metadata,
    })),
  };
}

/**
 * Reads a manifest from a tar file, which is untrusted input: every name must be a snapshot name whose kind and
 * revisions the entry repeats, every size a whole number, metadata what a store takes, no name twice.
 */
export function parseManifest(text: string, label: string): TarManifest {
  const bad = (why: string) =>
    new IntegrityError(`${label}: its manifest ${why}; it was not written by etcd-copy-backups export`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw bad('is not JSON');
  }
  const manifest = raw as Partial<TarManifest>;
  if (manifest?.format !== FORMAT) throw bad(`is not of format ${FORMAT}`);
  if (!Array.isArray(manifest.objects)) throw bad('lists no objects');
  const seen = new Set<string>();
  for (const o of manifest.objects as ManifestObject[]) {
    const ref = typeof o?.name === 'string' ? parseSnapshotName(o.name) : undefined;
    if (!ref) throw bad(`names "${String(o?.name)}", which is not a snapshot`);
    if (ref.kind !== o.kind || ref.startRevision !== o.startRevision || ref.lastRevision !== o.lastRevision) {
      throw bad(`describes ${o.name} otherwise than its name`);
    }
    if (!(Number.isSafeInteger(o.size) && o.size >= 0)) throw bad(`gives ${o.name} a size of ${String(o.size)}`);
    if (seen.has(o.name)) throw bad(`lists ${o.name} twice`);
    seen.add(o.name);
    try {
      if (typeof o.metadata !== 'object' || o.metadata === null || Array.isArray(o.metadata)) throw new Error();
      checkMetadata(o.metadata);
    } catch {
      throw bad(`gives ${o.name} metadata no store takes`);
    }
  }
  return manifest as TarManifest;
}
