import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { IntegrityError } from './errors.js';
import { SnapshotRevisionScanner } from './snapshot-revision.js';

/** etcd appends the sha256 of the bbolt db to every snapshot it streams. */
export const SNAPSHOT_TRAILER = 32;

/** What a verified full snapshot turned out to hold. */
export interface FullSnapshotFacts {
  /** Bytes including the sha256 trailer. */
  size: number;
  /** The store revision the db holds. */
  revision: number;
  /** Hex sha256 of the db (the trailer's value). */
  dbSha256: string;
}

/**
 * Passes an etcd snapshot stream (bbolt db + sha256 trailer) through unchanged and fails the stream at its
 * end unless the trailer matches the content, so a pipeline through it never completes on a damaged or
 * truncated snapshot. It also reads the snapshot's revision on the way (see snapshot-revision.ts).
 */
export class FullSnapshotCheck extends Transform {
  private readonly hash: Hash = createHash('sha256');
  private readonly scanner = new SnapshotRevisionScanner();
  private tail: Buffer = Buffer.alloc(0);
  private size = 0;
  private result?: FullSnapshotFacts;

  constructor(private readonly label: string) {
    super();
  }

  /** Available once the stream has ended without error. */
  facts(): FullSnapshotFacts {
    if (!this.result) throw new Error('FullSnapshotCheck.facts() read before the stream finished');
    return this.result;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.size += chunk.length;
      // Everything but the last 32 bytes seen so far is db content.
      if (chunk.length >= SNAPSHOT_TRAILER) {
        this.consume(this.tail);
        this.consume(chunk.subarray(0, chunk.length - SNAPSHOT_TRAILER));
        this.tail = Buffer.from(chunk.subarray(chunk.length - SNAPSHOT_TRAILER));
      } else {
        const joined = Buffer.concat([this.tail, chunk]);
        const cut = Math.max(0, joined.length - SNAPSHOT_TRAILER);
        this.consume(joined.subarray(0, cut));
        this.tail = joined.subarray(cut);
      }
      done(null, chunk);
    } catch (err) {
      done(err as Error);
    }
  }

  private consume(db: Buffer): void {
    if (db.length === 0) return;
    this.hash.update(db);
    this.scanner.write(db);
  }

  override _flush(done: TransformCallback): void {
    if (this.size % 512 !== SNAPSHOT_TRAILER) {
      return done(
        new IntegrityError(
          `${this.label} is truncated or not an etcd snapshot: ${this.size} bytes is not a bbolt db plus its 32-byte sha256`,
        ),
      );
    }
    const digest = this.hash.digest();
    if (!digest.equals(this.tail)) {
      return done(new IntegrityError(`${this.label} is damaged: its content does not match its sha256 trailer`));
    }
    try {
      this.result = { size: this.size, revision: this.scanner.revision(), dbSha256: digest.toString('hex') };
    } catch (err) {
      return done(new IntegrityError(`${this.label}: ${(err as Error).message}`));
    }
    done();
  }
}
