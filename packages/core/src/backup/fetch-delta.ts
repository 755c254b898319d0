import { createWriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
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
import { type DeltaEvent, DeltaParser } from '../format/delta-format.js';
import { type Revision, RevisionGrouper } from '../format/delta-revisions.js';
import { DeltaTrailerCheck } from '../format/delta-trailer-check.js';
import { ObjectNotFoundError, type SnapStore } from '../store/snapstore.js';
import { METADATA_SHA256, StoredDigest, verifyStoredDigest } from '../store/stored-digest.js';
import type { CatalogEntry } from './snapshot-catalog.js';
import { type OnRecovered, readThroughVersions, storedMetadata, versionOf } from './stored-versions.js';

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
 * only parsing can tell (revisions in order, within the name's range) is checked as the events are read. In a catalog
 * listed with versions, a delta whose version does not verify is read from the next older one (stored-versions.ts),
 * reported to `onRecovered`.
 */
export async function fetchDelta(
  store: SnapStore,
  entry: CatalogEntry,
  file: string,
  options: { signal?: AbortSignal; base?: ChainBase; onRecovered?: OnRecovered } = {},
): Promise<DeltaFacts> {
  return readThroughVersions(
    entry,
    (version) => fetchDeltaVersion(store, version, file, options),
    isUnusableObject,
    options.onRecovered,
  );
}

async function fetchDeltaVersion(
  store: SnapStore,
  entry: CatalogEntry,
  file: string,
  options: { signal?: AbortSignal; base?: ChainBase },
): Promise<DeltaFacts> {
  const label = `${store.location}/${entry.name}`;
  const stored = new StoredDigest();
  const version = versionOf(entry);
  // once for the size, the digest and what the digest proves
  const metadata = await storedMetadata(store, entry);
  const check = new DeltaTrailerCheck(label, { provenByStoredDigest: metadata[METADATA_SHA256] !== undefined });
  const recorded = recordedSize(metadata[METADATA_DECOMPRESSED_SIZE]);
  const { limit, why } = deltaDecompressedLimit(entry, recorded, options.base);
  await pipeline(
    await store.get(entry.name, version),
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
  verifyStoredDigest(metadata, stored, label);
  return { storedSize: stored.size, size: check.size };
}

/** A delta file is read this much at a time, the next read under way while the last is parsed. */
const READ_SIZE = 1 << 20;
const PARSE_SIZE = 64 << 10;

/**
 * The events of a decompressed delta file, in order, checked against its name as they are read: revisions
 * never go back nor skip one, and span exactly the name's range. Any breach is an IntegrityError. `verified`: the
 * file is what fetchDelta wrote and checked against its trailer, so its sha256 is not taken again.
 */
export async function* readDeltaEvents(
  file: string,
  entry: CatalogEntry,
  label: string,
  options: { verified?: boolean } = {},
): AsyncGenerator<DeltaEvent> {
  for await (const events of readDeltaPieces(file, entry, label, options)) yield* events;
}

/**
 * The revisions of a decompressed delta file (readDeltaEvents, grouped), handed on a parsed piece's worth at a
 * time: a replay takes ~45 single-put revisions a piece without an await between them, where one await an event
 * and one a revision cost the replay's thread ~0.2 s in 200,000 revisions (docs/performance.md).
 */
export async function* readDeltaRevisions(
  file: string,
  entry: CatalogEntry,
  label: string,
  options: { verified?: boolean } = {},
): AsyncGenerator<Revision[]> {
  const grouper = new RevisionGrouper();
  for await (const events of readDeltaPieces(file, entry, label, options)) {
    const revisions: Revision[] = [];
    for (const event of events) {
      const done = grouper.take(event);
      if (done) revisions.push(done);
    }
    if (revisions.length > 0) yield revisions;
  }
  const last = grouper.end();
  if (last) yield [last];
}

/** The checked events of a delta file, a parsed piece at a time (readDeltaEvents). */
async function* readDeltaPieces(
  file: string,
  entry: CatalogEntry,
  label: string,
  options: { verified?: boolean },
): AsyncGenerator<DeltaEvent[]> {
  const parser = new DeltaParser(label, options);
  const handle = await open(file, 'r');
  let reading: Promise<{ bytesRead: number }> | undefined;
  try {
    let last = 0;
    let events: DeltaEvent[] = [];
    const take = (e: DeltaEvent) => {
      if (last === 0 && e.modRevision < entry.startRevision) {
        throw new IntegrityError(
          `${label} starts at revision ${e.modRevision}, before ${entry.startRevision} as its name says`,
        );
      }
      if (last !== 0 && e.modRevision !== last && e.modRevision !== last + 1) {
        throw new IntegrityError(
          `${label}: its revisions ${e.modRevision < last ? 'go back' : 'skip'} from ${last} to ${e.modRevision}`,
        );
      }
      last = e.modRevision;
      events.push(e);
    };
    // Two buffers in turn: the parser never keeps a chunk (it copies what it holds over), so one can be refilled
    // while the other is parsed.
    const buffers = [Buffer.allocUnsafe(READ_SIZE), Buffer.allocUnsafe(READ_SIZE)];
    let turn = 0;
    reading = handle.read(buffers[turn], 0, READ_SIZE, null);
    for (;;) {
      const { bytesRead } = await reading;
      if (bytesRead === 0) break;
      const filled = buffers[turn];
      turn ^= 1;
      reading = handle.read(buffers[turn], 0, READ_SIZE, null);
      // A piece's events at a time, each handed on before the next piece is parsed: events kept alive across
      // a young-generation collection are copied by it (a whole read's worth cost the replay more than it saved).
      for (let at = 0; at < bytesRead; at += PARSE_SIZE) {
        let fault: unknown;
        try {
          parser.write(filled.subarray(at, Math.min(at + PARSE_SIZE, bytesRead)), take);
        } catch (err) {
          fault = err;
        }
        // the events before a fault are the delta's all the same: a partial restore keeps them
        if (events.length > 0) yield events;
        events = [];
        if (fault !== undefined) throw fault;
      }
    }
    parser.end();
    if (last !== entry.lastRevision) {
      throw new IntegrityError(`${label} ends at revision ${last}, but its name says ${entry.lastRevision}`);
    }
  } finally {
    await reading?.catch(() => {}); // a reader that stopped early leaves one read under way
    await handle.close();
  }
}

/** zlib's (gzip, zlib, zstd) errors for content that is not what its suffix says, or ends too soon. */
export function isDecompressionError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException)?.code;
  return typeof code === 'string' && (code.startsWith('Z_') || code.startsWith('ZSTD_'));
}

/** Whether a read failed for what the object is (damaged, or gone), not for the store or the disk. */
export function isUnusableObject(err: unknown): boolean {
  return err instanceof IntegrityError || isDecompressionError(err) || err instanceof ObjectNotFoundError;
}
