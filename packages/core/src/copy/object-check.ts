import { type Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { isDecompressionError } from '../backup/fetch-delta.js';
import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import { METADATA_DB_SIZE } from '../backup/take-full-snapshot.js';
import { IntegrityError } from '../common/errors.js';
import { boundedMemory } from '../common/memory-bound.js';
import { decompressor } from '../format/compression.js';
import {
  DecompressedLimit,
  decompressedLimit,
  deltaDecompressedLimit,
  MAX_COMPRESSION_RATIO,
  METADATA_DECOMPRESSED_SIZE,
  recordedFullSize,
  recordedSize,
} from '../format/decompressed-limit.js';
import { DeltaTrailerCheck } from '../format/delta-trailer-check.js';
import { FullSnapshotCheck, SnapshotTrailerCheck } from '../format/full-snapshot-check.js';
import { METADATA_SHA256, StoredDigest, storedDigestMismatch } from '../store/stored-digest.js';

/** What checking one snapshot object found. */
export interface CheckedObject {
  /** Bytes as stored (compressed). */
  storedSize: number;
  /** Hex sha256 of the stored bytes. */
  storedSha256: string;
  /** Full snapshots: the revision the db holds. */
  revision?: number;
}

/** A check being fed an object's stored bytes: write them to `input`; `result` settles once it has ended. */
export interface ObjectCheck {
  input: Writable;
  result: Promise<CheckedObject>;
}

/** Where a check reads an object to its end for its verdict alone. */
export function discardSink(): Writable {
  return new Writable({ write: (_chunk, _enc, done) => done() });
}

/**
 * Checks a snapshot object's stored bytes as they are written, without keeping them: the size the listing gave
 * (unless `decrypted` says the bytes were decrypted on the way), the sha256 recorded when it was stored (when
 * `metadata` has one; ebr records none), and its content by its own sha256 trailer (etcd's for a full snapshot,
 * the delta's for a delta) after decompression, which is bounded as fetch-full-snapshot.ts bounds it. With
 * `revision`, a full snapshot's pages are also scanned for the revision it holds, which must be at least what its
 * name says: verify does; a copy leaves that to whoever restores from it, since the scan costs as much CPU as a
 * third hash. With `storedDigestSuffices`, an object that carries a recorded sha256 is checked by it alone, its
 * content not decompressed: a copy's default (docs/copy-backups.md §1). Every failure is an IntegrityError naming
 * `label`.
 */
export function checkObject(
  entry: Pick<CatalogEntry, 'kind' | 'compression' | 'size' | 'startRevision' | 'lastRevision'>,
  metadata: Record<string, string>,
  label: string,
  options: { revision?: boolean; decrypted?: () => boolean; storedDigestSuffices?: boolean } = {},
): ObjectCheck {
  const stored = new StoredDigest();
  const discard = discardSink();
  const recorded = metadata[METADATA_SHA256];
  // We record a sha256 only of stored bytes whose content was checked first (a snapshot's, or a copy's under this
  // check), so the bytes matching it prove their content as decompressing them would, for the cost of the hash.
  const byDigestAlone = options.storedDigestSuffices === true && recorded !== undefined && !options.revision;
  const content = byDigestAlone ? undefined : contentCheck(entry, metadata, label, options.revision === true);
  const passed = content ? pipeline(stored, ...content.stages, discard) : pipeline(stored, discard);
  const result = passed
    .catch((err: unknown) => {
      throw isDecompressionError(err)
        ? new IntegrityError(`${label} is damaged: it does not decompress (${(err as Error).message})`, { cause: err })
        : err;
    })
    .then((): CheckedObject => {
      // A decrypted object is shorter than its listed size; its own chunks tell a cut tail (format/encryption/object-decipher.ts).
      if (stored.size !== entry.size && !options.decrypted?.()) {
        throw new IntegrityError(`${label} is truncated: ${stored.size} of its ${entry.size} bytes could be read`);
      }
      if (recorded && recorded !== stored.sha256()) {
        throw storedDigestMismatch(label);
      }
      const revision = content?.scanned?.facts().revision;
      // ebr may name a full snapshot with an older revision than it holds (etcd#9037), never a newer one.
      if (revision !== undefined && revision < entry.lastRevision) {
        throw new IntegrityError(`${label} holds revision ${revision}, but its name says ${entry.lastRevision}`);
      }
      return {
        storedSize: stored.size,
        storedSha256: stored.sha256(),
        ...(revision !== undefined ? { revision } : {}),
      };
    });
  return { input: stored, result };
}

/**
 * The stages that check an object's content from its stored bytes: decompressed (bounded as
 * fetch-full-snapshot.ts bounds it), then by its own sha256 trailer, or with `revision` a full snapshot's pages
 * scanned too.
 */
function contentCheck(
  entry: Pick<CatalogEntry, 'kind' | 'compression' | 'size' | 'startRevision' | 'lastRevision'>,
  metadata: Record<string, string>,
  label: string,
  revision: boolean,
): { stages: [Transform, Transform, Transform, Transform]; scanned?: FullSnapshotCheck } {
  const isFull = entry.kind === 'Full';
  const recordedDbSize = isFull ? recordedFullSize(entry.size, metadata[METADATA_DB_SIZE]) : undefined;
  const scanned = isFull && revision ? new FullSnapshotCheck(label) : undefined;
  const content = scanned ?? (isFull ? new SnapshotTrailerCheck(label) : new DeltaTrailerCheck(label));
  const bound = isFull
    ? {
        limit: decompressedLimit(entry.size, recordedDbSize),
        why:
          recordedDbSize !== undefined
            ? 'the db size recorded when it was stored'
            : `${MAX_COMPRESSION_RATIO} times its stored size, or 64 MiB`,
      }
    : deltaDecompressedLimit(entry, recordedSize(metadata[METADATA_DECOMPRESSED_SIZE]));
  const limit = new DecompressedLimit(bound.limit, label, bound.why);
  return { stages: [decompressor(entry.compression), limit, boundedMemory(), content], scanned };
}
