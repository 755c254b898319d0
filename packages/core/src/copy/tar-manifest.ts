import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import { IntegrityError } from '../common/errors.js';
import { checkEnvelopeHeader } from '../format/encryption/envelope-header.js';
import { parseSnapshotName } from '../format/snapshot-name.js';
import { checkMetadata } from '../store/metadata.js';

/** tar-stream, loaded when a tar is written or read: no other work of the programs needs it at start-up. */
export async function loadTarStream(): Promise<typeof import('tar-stream')> {
  return (await import('tar-stream')).default;
}

/** The first entry of an exported tar file; the snapshots follow as `objects/<object name>`. */
export const MANIFEST_ENTRY = 'etcd-copy-backups.json';
export const OBJECTS_FOLDER = 'objects/';
const FORMAT = 'etcd-copy-backups/1';
/** A manifest of a million snapshots stays well below this; anything larger is not ours. */
export const MAX_MANIFEST_BYTES = 64 << 20;

/**
 * An encrypted snapshot's envelope (docs/encryption.md §1), which the tar carries as stored: what checks it without
 * the key (the sha256 of its stored bytes, which no store records) and what tells a missing or wrong key before
 * anything is written (its header, which holds no secret).
 */
export interface ManifestEncryption {
  keyId: string;
  /** Hex sha256 of the stored (encrypted) bytes. */
  sha256: string;
  /** The object's encryption header, base64. */
  header: string;
}

/** One snapshot of the tar file: its name, size, revisions and the metadata a copy carries (sha256, db size). */
export interface ManifestObject {
  name: string;
  size: number;
  kind: 'Full' | 'Incr';
  startRevision: number;
  lastRevision: number;
  metadata: Record<string, string>;
  /** Only for an encrypted snapshot. */
  encryption?: ManifestEncryption;
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
  objects: Array<{ entry: CatalogEntry; metadata: Record<string, string>; encryption?: ManifestEncryption }>,
): TarManifest {
  return {
    format: FORMAT,
    source,
    createdAt: new Date().toISOString(),
    objects: objects.map(({ entry, metadata, encryption }) => ({
      name: entry.name,
      size: entry.size,
      kind: entry.kind,
      startRevision: entry.startRevision,
      lastRevision: entry.lastRevision,
      metadata,
      ...(encryption ? { encryption } : {}),
    })),
  };
}

/**
 * Reads a manifest from a tar file, which is untrusted input: every name must be a snapshot name whose kind and
 * revisions the entry repeats, every size a whole number, metadata what a store takes, no name twice, an
 * encrypted snapshot's header one of this version naming its key id.
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
    if (o.encryption !== undefined && !soundEncryption(o.encryption, o.name)) {
      throw bad(`describes the encryption of ${o.name} in a way no export does`);
    }
  }
  return manifest as TarManifest;
}

function soundEncryption(e: ManifestEncryption, name: string): boolean {
  if (typeof e !== 'object' || e === null || typeof e.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(e.sha256)) {
    return false;
  }
  if (typeof e.header !== 'string' || !/^[A-Za-z0-9+/]+={0,2}$/.test(e.header)) return false;
  try {
    return checkEnvelopeHeader(Buffer.from(e.header, 'base64'), name) === e.keyId;
  } catch {
    return false;
  }
}
