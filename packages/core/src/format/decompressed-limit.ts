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

/** What an object of `storedSize` bytes may decompress to: `recorded` (its exact size) when known. */
export function decompressedLimit(storedSize: number, recorded?: number): number {
  if (recorded !== undefined) return recorded;
  return Math.max(SMALL_OBJECT_ALLOWANCE, storedSize * MAX_COMPRESSION_RATIO);
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
