import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { dirname } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { IntegrityError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { boundedMemory } from '../common/memory-bound.js';
import { byteProgress } from '../common/progress.js';
import { decompressor } from '../format/compression.js';
import {
  DecompressedLimit,
  decompressedLimit,
  MAX_COMPRESSION_RATIO,
  recordedFullSize,
} from '../format/decompressed-limit.js';
import { FullSnapshotCheck, type FullSnapshotFacts } from '../format/full-snapshot-check.js';
import type { SnapStore } from '../store/snapstore.js';
import { METADATA_SHA256, StoredDigest, verifyStoredDigest } from '../store/stored-digest.js';
import { isUnusableObject } from './fetch-delta.js';
import type { CatalogEntry } from './snapshot-catalog.js';
import { storedMetadata, versionOf } from './stored-versions.js';
import { METADATA_DB_SIZE } from './take-full-snapshot.js';

/**
 * Downloads a full snapshot into `file`, decompressed, and verifies it on the way: the stored bytes
 * against our recorded sha256 (when the object has one) and the db against etcd's sha256 trailer.
 * Throws IntegrityError when either does not match; the caller decides whether to fall back (to an older full, or to
 * an older version of this one: stored-versions.ts's olderVersion, in a fresh file). The file is written
 * from its start and never truncated: a replay may already be writing its own pages past where the db will end
 * (ReplayEngine.prepare). Give a path that holds nothing else.
 */
export async function fetchFullSnapshot(
  store: SnapStore,
  entry: CatalogEntry,
  file: string,
  options: { logger?: Logger; signal?: AbortSignal } = {},
): Promise<FullSnapshotFacts> {
  const label = `${store.location}/${entry.name}`;
  const stored = new StoredDigest();
  const metadata = await storedMetadata(store, entry);
  const recorded = recordedFullSize(entry.size, metadata[METADATA_DB_SIZE]);
  const check = new FullSnapshotCheck(label, {
    spillDir: dirname(file),
    provenByStoredDigest: metadata[METADATA_SHA256] !== undefined,
  });
  await pipeline(
    await store.get(entry.name, versionOf(entry)),
    stored,
    byteProgress(options.logger ?? silentLogger, 'download', entry.size),
    decompressor(entry.compression),
    new DecompressedLimit(
      decompressedLimit(entry.size, recorded),
      label,
      recorded !== undefined
        ? 'the db size recorded when it was stored'
        : `${MAX_COMPRESSION_RATIO} times its stored size, or 64 MiB`,
    ),
    boundedMemory(),
    check,
    (await open(file, constants.O_WRONLY | constants.O_CREAT)).createWriteStream(),
    { signal: options.signal },
  );
  verifyStoredDigest(metadata, stored, label);
  const facts = check.facts();
  // ebr names a full snapshot with a revision read just before it streams the db (etcd#9037), so the content
  // may be newer than the name; older would be a damaged or misnamed object.
  if (facts.revision < entry.lastRevision) {
    throw new IntegrityError(`${label} holds revision ${facts.revision}, but its name says ${entry.lastRevision}`);
  }
  return facts;
}

/**
 * Whether fetchFullSnapshot failed because the full cannot start a chain (damaged: digest, trailer or
 * compression; or gone), rather than because the store or the disk failed: restore then takes an older full,
 * and gc protects the older full's chain.
 */
export function isUnusableFullSnapshot(err: unknown): boolean {
  return isUnusableObject(err);
}

/**
 * The db size we record with a full snapshot (ebr records none), when believable for its stored size
 * (recordedFullSize).
 */
export async function recordedDbSize(store: SnapStore, entry: CatalogEntry): Promise<number | undefined> {
  return recordedFullSize(entry.size, (await storedMetadata(store, entry))[METADATA_DB_SIZE]);
}
