import { Transform, type TransformCallback } from 'node:stream';
import type { PageTableOptions } from '../bbolt/page-table.js';
import { SnapshotRevisionScanner } from '../bbolt/snapshot-revision.js';
import { IntegrityError } from '../common/errors.js';
import { SHA256_TRAILER, Sha256Trailer, type TrailerOptions } from './sha256-trailer.js';

/** etcd appends the sha256 of the bbolt db to every snapshot it streams. */
export const SNAPSHOT_TRAILER = SHA256_TRAILER;

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
 * Passes an etcd snapshot stream (bbolt db + sha256 trailer) through unchanged and fails the stream at its end
 * unless the trailer matches the content, so a pipeline through it never completes on a damaged or truncated
 * snapshot. Where the revision is not needed (a copy, whose reader checks it), this is the whole check.
 */
export class SnapshotTrailerCheck extends Transform {
  protected readonly trailer: Sha256Trailer;

  constructor(
    protected readonly label: string,
    options: TrailerOptions = {},
  ) {
    super();
    this.trailer = new Sha256Trailer(options);
  }

  /** Each piece now known to be the db, as it passes. */
  protected onDb(_db: Buffer): void {}

  /** Once the trailer matched. */
  protected onSound(): void {}

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.trailer.push(chunk, (db) => this.onDb(db));
      done(null, chunk);
    } catch (err) {
      done(err as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    const size = this.trailer.size;
    if (size % 512 !== SNAPSHOT_TRAILER) {
      return done(
        new IntegrityError(
          `${this.label} is truncated or not an etcd snapshot: ${size} bytes is not a bbolt db plus its 32-byte sha256`,
        ),
      );
    }
    if (!this.trailer.matches()) {
      return done(new IntegrityError(`${this.label} is damaged: its content does not match its sha256 trailer`));
    }
    try {
      this.onSound();
    } catch (err) {
      return done(new IntegrityError(`${this.label}: ${(err as Error).message}`));
    }
    done();
  }
}

/**
 * The trailer's check, and the snapshot's revision read on the way (see snapshot-revision.ts). `spillDir`: where the
 * scan's page table goes beyond its first pages (the system temp dir if not set).
 */
export class FullSnapshotCheck extends SnapshotTrailerCheck {
  private readonly scanner: SnapshotRevisionScanner;
  private result?: FullSnapshotFacts;

  constructor(label: string, options: PageTableOptions & TrailerOptions = {}) {
    super(label, options);
    this.scanner = new SnapshotRevisionScanner(options);
  }

  /** Available once the stream has ended without error. */
  facts(): FullSnapshotFacts {
    if (!this.result) throw new Error('FullSnapshotCheck.facts() read before the stream finished');
    return this.result;
  }

  protected override onDb(db: Buffer): void {
    this.scanner.write(db);
  }

  protected override onSound(): void {
    const dbSha256 = this.trailer.bodySha256().toString('hex');
    this.result = { size: this.trailer.size, revision: this.scanner.revision(), dbSha256 };
  }

  override _destroy(err: Error | null, done: (err: Error | null) => void): void {
    this.scanner.close();
    done(err);
  }
}
