import { createHash, type Hash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { Transform, type TransformCallback } from 'node:stream';
import { IntegrityError } from '../common/errors.js';
import { ObjectExistsError } from './snapstore.js';

/** Object metadata key of the sha256 of an object's stored (compressed) bytes, recorded when we upload it. */
export const METADATA_SHA256 = 'sha256';

/** Meters an object's stored bytes as they stream past: their sha256 (unless `hashing` is false) and size. */
export class StoredDigest extends Transform {
  private readonly hash?: Hash;
  private digest?: string;
  size = 0;

  constructor(hashing = true) {
    super();
    if (hashing) this.hash = createHash('sha256');
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.hash?.update(chunk);
    this.size += chunk.length;
    done(null, chunk);
  }

  sha256(): string {
    if (!this.hash) throw new Error('StoredDigest: made without hashing');
    this.digest ??= this.hash.digest('hex');
    return this.digest;
  }
}

/**
 * Checks downloaded bytes against the sha256 recorded at upload, when the object's metadata (its listing's, or a
 * stat's where the listing carries none: backup/stored-versions.ts's storedMetadata) has one; ebr records none.
 */
export function verifyStoredDigest(metadata: Record<string, string>, digest: StoredDigest, label: string): void {
  const expected = metadata[METADATA_SHA256];
  if (expected && expected !== digest.sha256()) throw storedDigestMismatch(label);
}

/** The error of an object, named by `label`, whose stored bytes are not those its recorded sha256 was taken of. */
export function storedDigestMismatch(label: string): IntegrityError {
  return new IntegrityError(`${label} is damaged: its bytes do not match the sha256 recorded when it was stored`);
}

/**
 * A snapshot put where a store that keeps versions already holds one of its name, which would stack a new version on
 * it rather than replace it: true when the stored one is this same snapshot again (the sha256 `ours`), a retried
 * upload whose first try went through, `body` then drained unread; an ObjectExistsError saying `why` otherwise.
 */
export function storedAgain(
  where: { location: string; name: string },
  stored: Record<string, string>,
  ours: string | undefined,
  body: Readable | undefined,
  why: string,
): true {
  if (ours && stored[METADATA_SHA256] === ours) {
    body?.resume(); // not wanted, but read to its end: whatever feeds it ends as after a put
    return true;
  }
  body?.destroy();
  throw new ObjectExistsError(where.location, where.name, why);
}
