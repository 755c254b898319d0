import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { IntegrityError } from '../common/errors.js';
import { boundedMemory } from '../common/memory-bound.js';
import { decompressor } from '../format/compression.js';
import {
  type ChainBase,
  DecompressedLimit,
  deltaDecompressedLimit,
  METADATA_DECOMPRESSED_SIZE,
  recordedSize,
} from '../format/decompressed-limit.js';
import { DeltaTrailerCheck } from '../format/delta-trailer-check.js';
import type { SnapStore } from '../store/snapstore.js';
import { StoredDigest, verifyStoredDigest } from '../store/stored-digest.js';
import type { CatalogEntry } from './snapshot-catalog.js';

/** What a fetched delta turned out to be. */
export interface DeltaFacts {
  /** Bytes as stored (compressed). */
  storedSize: number;
  /** Bytes of the decompressed delta (JSON and trailer), as written to the file. */
  size: number;
}

/**
 * Downloads a delta into `file`, decompressed, and verifies it on the way: the stored bytes against our
 * recorded sha256 (when the object has one) and the JSON against the delta's own sha256 trailer. Decompression
 * stops at the delta's recorded size, or at what etcd could have written after `base` (deltaDecompressedLimit). So a
 * damaged or truncated delta is found before any of its events is applied, without parsing it twice; what
 * only parsing can tell (revisions in order, within the name's range) is checked as the events are read.
 */
export async function fetchDelta(
  store: SnapStore,
  entry: CatalogEntry,
  file: string,
  options: { signal?: AbortSignal; base?: ChainBase } = {},
): Promise<DeltaFacts> {
  const label = `${store.location}/${entry.name}`;
  const stored = new StoredDigest();
  const check = new DeltaTrailerCheck(label);
  // S3 listings carry no metadata: ask, once for both the size and the digest.
  const metadata = Object.keys(entry.metadata).length > 0 ? entry.metadata : (await store.stat(entry.name))?.metadata;
  const recorded = recordedSize(metadata?.[METADATA_DECOMPRESSED_SIZE]);
  const { limit, why } = deltaDecompressedLimit(entry, recorded, options.base);
  await pipeline(
    await store.get(entry.name),
    stored,
    decompressor(entry.compression),
    new DecompressedLimit(limit, label, why),
    boundedMemory(),
    check,
    createWriteStream(file),
    { signal: options.signal },
  ).catch((err) => {
    throw isDecompressionError(err)
      ? new IntegrityError(`${label} is damaged: it does not decompress (${(err as Error).message})`, { cause: err })
      : err;
  });
  await verifyStoredDigest(store, { name: entry.name, metadata: metadata ?? {} }, stored, label);
  return { storedSize: stored.size, size: check.size };
}

/** zlib's (gzip, zlib, zstd) errors for content that is not what its suffix says, or ends too soon. */
export function isDecompressionError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException)?.code;
  return typeof code === 'string' && (code.startsWith('Z_') || code.startsWith('ZSTD_'));
}
