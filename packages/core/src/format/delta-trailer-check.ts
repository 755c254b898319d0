import { Transform, type TransformCallback } from 'node:stream';
import { IntegrityError } from '../common/errors.js';
import { DELTA_TRAILER } from './delta-format.js';
import { Sha256Trailer, type TrailerOptions } from './sha256-trailer.js';

/** Passes a decompressed delta through and fails at its end unless the last 32 bytes are the sha256 of the rest. */
export class DeltaTrailerCheck extends Transform {
  private readonly trailer: Sha256Trailer;

  constructor(
    private readonly label: string,
    options: TrailerOptions = {},
  ) {
    super();
    this.trailer = new Sha256Trailer(options);
  }

  get size(): number {
    return this.trailer.size;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.trailer.push(chunk);
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    if (this.size <= DELTA_TRAILER) return done(new IntegrityError(`${this.label} is truncated: it holds no events`));
    if (!this.trailer.matches()) {
      return done(
        new IntegrityError(`${this.label} is truncated or damaged: its content does not match its sha256 trailer`),
      );
    }
    done();
  }
}
