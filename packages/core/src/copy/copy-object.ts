import { pipeline, Transform } from 'node:stream';
import { METADATA_REVISION_DIGEST } from '../backup/revision-digest.js';
import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import { storedMetadata, versionOf } from '../backup/stored-versions.js';
import { METADATA_DB_SIZE, METADATA_ETCD_VERSION } from '../backup/take-full-snapshot.js';
import { boundedMemory } from '../common/memory-bound.js';
import { METADATA_DECOMPRESSED_SIZE } from '../format/decompressed-limit.js';
import { METADATA_READ_BACK } from '../format/read-back.js';
import { METADATA_ENCRYPTION_KEY_ID, wasDecrypted } from '../store/encrypted-store.js';
import { checkMetadata } from '../store/metadata.js';
import type { CopyWay, SnapStore } from '../store/snapstore.js';
import { METADATA_SHA256 } from '../store/stored-digest.js';
import { type CheckedObject, checkObject } from './object-check.js';
import { VerifiedBody } from './verified-body.js';

/**
 * What a copy checks of each object besides its size: 'stored', its stored bytes by their recorded sha256 where they
 * carry one (its content only where they do not); 'content', its content always, and that sha256 too.
 */
export const COPY_CHECKS = ['stored', 'content'] as const;
export type CopyCheck = (typeof COPY_CHECKS)[number];

/** The metadata a copy carries over: ours, which the next reader checks against (other keys are no concern of ours). */
const CARRIED = [
  METADATA_SHA256,
  METADATA_DB_SIZE,
  METADATA_DECOMPRESSED_SIZE,
  METADATA_ETCD_VERSION,
  METADATA_REVISION_DIGEST,
  METADATA_READ_BACK,
];

/**
 * An object's metadata: the listing's, or a stat's where the listing carries none (S3). Only the keys a copy
 * carries, and only values every provider takes: store contents are not trusted.
 */
export async function objectMetadata(store: SnapStore, entry: CatalogEntry): Promise<Record<string, string>> {
  return carried(await storedMetadata(store, entry));
}

function carried(raw: Record<string, string>): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const key of CARRIED) {
    const value = raw[key];
    if (value === undefined) continue;
    try {
      checkMetadata({ [key]: value });
      kept[key] = value;
    } catch {}
  }
  return kept;
}

/**
 * Streams one object from `from` to `to` under the same name, checked on the way (object-check.ts): its content
 * decompressed and checked, or with `check: 'stored'` (the program's default) only where it carries no sha256
 * recorded when it was stored, which otherwise is the proof. A damaged object fails with an IntegrityError naming
 * it and leaves nothing at the destination. `onBytes` hears of every chunk, for progress.
 */
export async function copyObject(
  from: SnapStore,
  to: SnapStore,
  entry: CatalogEntry,
  options: { signal?: AbortSignal; onBytes?: (bytes: number) => void; check?: CopyCheck } = {},
): Promise<CopiedObject> {
  const stored = await storedMetadata(from, entry);
  const metadata = carried(stored);
  // Where the kernel (two local stores) or the store's server (two buckets of one S3 endpoint) can copy a snapshot
  // whose recorded sha256 suffices as its check, it does, and that sha256 is proven of what landed before it counts:
  // the bytes never pass through this program. Not for a version read through a delete marker, nor encrypted bytes.
  const sha256 = metadata[METADATA_SHA256];
  const copyable =
    options.check === 'stored' &&
    sha256 &&
    versionOf(entry).versionId === undefined &&
    !stored[METADATA_ENCRYPTION_KEY_ID];
  const where = copyable ? from.copySource?.(entry.name) : undefined;
  if (where && sha256 && to.putCopy) {
    const expected = { sha256, size: entry.size };
    const way = await to.putCopy(entry.name, where, expected, {
      metadata,
      signal: options.signal,
      source: from.location,
    });
    if (way) {
      options.onBytes?.(entry.size);
      return { storedSize: entry.size, storedSha256: sha256, way };
    }
  }
  const source = await from.get(entry.name, versionOf(entry));
  const check = checkObject(entry, metadata, `${from.location}/${entry.name}`, {
    decrypted: () => wasDecrypted(source),
    storedDigestSuffices: options.check === 'stored',
  });
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      options.onBytes?.(chunk.length);
      done(null, chunk);
    },
  });
  // An error anywhere destroys every stage, the body the put reads included, so the put fails and lands nothing.
  // The stored bytes' chunks die young but pile up until V8 collects them: collected every few MB instead.
  const body = pipeline(source, counter, boundedMemory(), new VerifiedBody(check), () => {});
  try {
    await to.put(entry.name, body, { metadata, signal: options.signal });
  } catch (err) {
    body.destroy(err as Error);
    check.input.destroy(err as Error);
    // The check's own failure says what is wrong with the object; the put's only that it stopped.
    throw await check.result.then(
      () => err,
      (checkErr: unknown) => checkErr,
    );
  }
  return { ...(await check.result), way: 'streamed' };
}

/** A copied object's check, and which way it went: copied by the kernel or the store's server, or streamed. */
export type CopiedObject = CheckedObject & { way: CopyWay | 'streamed' };

/**
 * Whether `held`, an object of the destination with the name and size of the one to copy, is that object: the
 * same sha256 where both sides recorded one (stores whose listings carry no metadata are asked).
 */
export async function alreadyHeld(to: SnapStore, held: CatalogEntry, sha256: string | undefined): Promise<boolean> {
  if (!sha256) return true;
  const theirs = (await objectMetadata(to, held))[METADATA_SHA256];
  return !theirs || theirs === sha256;
}
