import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type CompressionPolicy, compressionSuffix, compressor } from '../format/compression.js';
import { METADATA_DECOMPRESSED_SIZE } from '../format/decompressed-limit.js';
import { type DeltaEvent, encodeDelta } from '../format/delta-format.js';
import { formatReadBack, METADATA_READ_BACK, type RevisionRanges } from '../format/read-back.js';
import { snapshotName } from '../format/snapshot-name.js';
import type { SnapStore } from '../store/snapstore.js';
import { METADATA_SHA256, StoredDigest } from '../store/stored-digest.js';

/** A delta to store: its revisions (the events must span them exactly), creation time and compression. */
export interface NewStoredDelta {
  startRevision: number;
  lastRevision: number;
  /** Unix seconds, as the name carries it. */
  createdAt: number;
  compression: CompressionPolicy;
  /** Which of its revisions were read back rather than received live (read-back.ts); undefined: not known. */
  readBack?: RevisionRanges;
}

/**
 * Stores a delta made of `events`, with the metadata a delta of ours carries (the sha256 of its stored bytes, its
 * decompressed size, its read-back revisions): encoded and compressed into a file in a scratch folder under
 * `tempDir` first, since the sha256 goes with the upload, then put (or moved, for a local store). Streams: memory
 * does not grow with the delta. Returns its name; one stored already under that name is kept as it is.
 */
export async function storeDelta(
  store: SnapStore,
  delta: NewStoredDelta,
  events: AsyncIterable<DeltaEvent>,
  options: { tempDir: string; signal?: AbortSignal },
): Promise<string> {
  const name = snapshotName({
    kind: 'Incr',
    startRevision: delta.startRevision,
    lastRevision: delta.lastRevision,
    createdAt: delta.createdAt,
    compression: compressionSuffix(delta.compression),
    final: false,
  });
  if (await store.stat(name)) return name;
  const dir = await mkdtemp(join(options.tempDir, 'stored-delta-'));
  try {
    const file = join(dir, 'delta');
    let decompressed = 0;
    const stored = new StoredDigest();
    const counted = new Transform({
      transform(chunk: Buffer, _enc, done) {
        decompressed += chunk.length;
        done(null, chunk);
      },
    });
    await pipeline(encodeDelta(events), counted, compressor(delta.compression), stored, createWriteStream(file), {
      signal: options.signal,
    });
    const metadata: Record<string, string> = {
      [METADATA_SHA256]: stored.sha256(),
      [METADATA_DECOMPRESSED_SIZE]: String(decompressed),
    };
    if (delta.readBack) metadata[METADATA_READ_BACK] = formatReadBack(delta.readBack);
    if (store.putFile) await store.putFile(name, file, { metadata, signal: options.signal });
    else await store.put(name, createReadStream(file), { metadata, signal: options.signal });
    return name;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
