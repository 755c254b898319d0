import { createHash, type Hash } from 'node:crypto';
import { ftruncateSync, readSync, writeSync } from 'node:fs';
import { OperationError } from '../common/errors.js';

/** Length of the sha256 that ends etcd's snapshots and ebr's deltas. */
export const SHA256_TRAILER = 32;

/** How a trailer check takes a stream's content. */
export interface TrailerOptions {
  /**
   * The bytes' content is already proven: they carry a recorded sha256 of the stored bytes, checked by the caller
   * once the stream has ended, which we record only of content checked first (docs/concepts.md, Verification). The
   * body is then not hashed again: the trailer's place and length are checked, not its value.
   */
  provenByStoredDigest?: boolean;
}

/**
 * Splits bytes as they stream into a body and the 32-byte sha256 of that body which ends them — the shape
 * of both etcd's snapshot stream and ebr's delta. Until the end, the last 32 bytes seen may be the trailer,
 * so they are held back; everything before them is body, hashed (unless its content is proven: TrailerOptions) and
 * handed on.
 */
export class Sha256Trailer {
  private readonly hash?: Hash;
  private tail: Buffer = Buffer.alloc(0);
  private digest?: Buffer;
  /** All bytes seen, trailer included. */
  size = 0;

  constructor(options: TrailerOptions = {}) {
    if (!options.provenByStoredDigest) this.hash = createHash('sha256');
  }

  /** Takes the next bytes; `onBody` gets each piece now known to be body. */
  push(chunk: Buffer, onBody?: (body: Buffer) => void): void {
    this.size += chunk.length;
    const body = (piece: Buffer) => {
      if (piece.length === 0) return;
      this.hash?.update(piece);
      onBody?.(piece);
    };
    if (chunk.length >= SHA256_TRAILER) {
      body(this.tail);
      body(chunk.subarray(0, chunk.length - SHA256_TRAILER));
      this.tail = Buffer.from(chunk.subarray(chunk.length - SHA256_TRAILER));
    } else {
      const joined = Buffer.concat([this.tail, chunk]);
      const cut = Math.max(0, joined.length - SHA256_TRAILER);
      body(joined.subarray(0, cut));
      this.tail = joined.subarray(cut);
    }
  }

  /** The sha256 of the body, taken or (proven) as the trailer says; call once all bytes are in. */
  bodySha256(): Buffer {
    this.digest ??= this.hash ? this.hash.digest() : Buffer.from(this.tail);
    return this.digest;
  }

  /** Whether the last 32 bytes are the sha256 of everything before them (proven: whether there are 32 to be one). */
  matches(): boolean {
    return this.tail.length === SHA256_TRAILER && (!this.hash || this.bodySha256().equals(this.tail));
  }
}

/**
 * Ends the file open at `fd` after its first `size` bytes with their sha256, read back a chunk at a time: an
 * etcd snapshot made from a db written here. Returns the digest.
 */
export function appendSha256Trailer(fd: number, size: number): Buffer {
  const hash = createHash('sha256');
  const chunk = Buffer.allocUnsafe(1 << 20);
  for (let at = 0; at < size; ) {
    const n = readSync(fd, chunk, 0, Math.min(chunk.length, size - at), at);
    if (n === 0) throw new OperationError(`the db ends at byte ${at}, expected ${size}`);
    hash.update(chunk.subarray(0, n));
    at += n;
  }
  const digest = hash.digest();
  writeSync(fd, digest, 0, SHA256_TRAILER, size);
  ftruncateSync(fd, size + SHA256_TRAILER);
  return digest;
}
