import { Transform, type TransformCallback } from 'node:stream';
import { IntegrityError } from '../common/errors.js';
import { formatBytes } from '../common/format-bytes.js';

/**
 * The most an object may expand when it is decompressed, for objects without a recorded size: etcd's data
 * (bbolt pages, JSON with base64 values) compresses far less than this, while a few KiB of hostile or damaged
 * zstd can claim gigabytes.
 */
export const MAX_COMPRESSION_RATIO = 1000;
/** Small objects may expand up to this, whatever their ratio. */
const SMALL_OBJECT_ALLOWANCE = 64 * 1024 * 1024;

/**
 * What an object of `storedSize` bytes may decompress to: `recorded` (its exact size) when known, but never more
 * than the compression-ratio bound: metadata is as open to damage and forgery as the bytes it describes, and a
 * recorded size of a terabyte would otherwise let a bomb fill the disk.
 */
export function decompressedLimit(storedSize: number, recorded?: number): number {
  const bound = Math.max(SMALL_OBJECT_ALLOWANCE, storedSize * MAX_COMPRESSION_RATIO);
  return recorded !== undefined && recorded <= bound ? recorded : bound;
}

/**
 * A full snapshot's recorded db size (`db-size` metadata) when it is believable for its stored size: no more than
 * the compression-ratio bound (decompressedLimit). A larger one is ignored, as if none were recorded.
 */
export function recordedFullSize(storedSize: number, value: string | undefined): number | undefined {
  const recorded = recordedSize(value);
  return recorded !== undefined && recorded === decompressedLimit(storedSize, recorded) ? recorded : undefined;
}

/** Object metadata key of a delta's decompressed size (its JSON and trailer), recorded when it is stored. */
export const METADATA_DECOMPRESSED_SIZE = 'decompressed-size';

/** A size recorded in object metadata: a positive integer, or undefined when there is none or it is not one. */
export function recordedSize(value: string | undefined): number | undefined {
  const n = Number(value);
  return value !== undefined && Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/**
 * The largest request etcd takes as ebr and etcd-druid configure it (`--max-request-bytes` 10 MiB; etcd's own
 * default is 1.5 MiB) and the operations a txn may hold (`--max-txn-ops`, as the restore's grpc replay assumes).
 */
const REQUEST_BYTES = 10 << 20;
const TXN_OPS = 10 * 1024;
/** A delta event's JSON beyond its key and value: type, revisions, version, lease, time (about 150 bytes). */
const EVENT_FIELDS = 256;
/** The most one revision's puts add to a delta: its request's keys and values in base64, and each event's fields. */
const REVISION_BYTES = Math.ceil((REQUEST_BYTES * 4) / 3) + TXN_OPS * EVENT_FIELDS;
/**
 * A deleted key's event (its key in base64 and about 100 bytes) against the least the key takes in a db (its key,
 * its revision's 17-byte key, its record and a page element, over 40 bytes besides the key): under 3 times.
 */
const DELETE_PER_DB_BYTE = 4;
/** The array's brackets, the trailer, and room for rounding. */
const DELTA_SLACK = 1 << 20;

/** A delta's chain as far as its bound goes: the revision and db size of the full snapshot it continues. */
export interface ChainBase {
  revision: number;
  dbSize: number;
}

/**
 * What a delta may decompress to, and why, for its error. With `recorded` (its size when it was stored), no more
 * than that; without (ebr records none), no more than what etcd could have written into it, given `base`: each of
 * its revisions at most one request's puts, and deletions of at most every key there was, those of the full
 * snapshot (bounded by its db size) and those put since (each no longer than its put, bounded in turn by the
 * revisions since the full). Neither is ever looser than the bound by the compression ratio.
 */
export function deltaDecompressedLimit(
  delta: { size: number; startRevision: number; lastRevision: number },
  recorded?: number,
  base?: ChainBase,
): { limit: number; why: string } {
  let limit = decompressedLimit(delta.size);
  let why = `${MAX_COMPRESSION_RATIO} times its stored size, or 64 MiB`;
  if (base) {
    const revisions = delta.lastRevision - delta.startRevision + 1;
    const since = Math.max(0, delta.lastRevision - base.revision);
    const bound = (revisions + since) * REVISION_BYTES + DELETE_PER_DB_BYTE * base.dbSize + DELTA_SLACK;
    if (bound < limit) {
      limit = bound;
      why = `what etcd can write in its ${revisions} revision(s), ${since} after a full snapshot of ${formatBytes(base.dbSize)}`;
    }
  }
  if (recorded !== undefined && recorded <= limit)
    return { limit: recorded, why: 'the size recorded when it was stored' };
  return { limit, why };
}

/**
 * Passes decompressed bytes through and fails as soon as there are more than `limit`, so that a bomb in the
 * store fills neither memory nor the disk it is written to.
 */
export class DecompressedLimit extends Transform {
  private size = 0;

  constructor(
    private readonly limit: number,
    private readonly label: string,
    private readonly why: string,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.limit) {
      return done(
        new IntegrityError(
          `${this.label} is damaged or hostile: it decompresses to more than ${formatBytes(this.limit)} (${this.why}); it was not used`,
        ),
      );
    }
    done(null, chunk);
  }
}
