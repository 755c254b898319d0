import { Transform, type TransformCallback } from 'node:stream';
import type { ObjectCheck } from './object-check.js';

/**
 * Passes an object's stored bytes on to an upload while an ObjectCheck reads them too, and ends only once the
 * check has passed. Every provider makes an object visible only after its body ended (the local store's rename,
 * the multipart complete, the block list commit, the resumable upload's last chunk), so a damaged object fails the
 * put instead and nothing lands. A check that fails early (not decompressible, too large) stops the upload then.
 */
export class VerifiedBody extends Transform {
  constructor(private readonly check: ObjectCheck) {
    super();
    check.result.catch((err: unknown) => this.destroy(err as Error));
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.check.input.write(chunk)) return done(null, chunk);
    this.check.input.once('drain', () => done(null, chunk));
  }

  override _flush(done: TransformCallback): void {
    this.check.input.end();
    this.check.result.then(
      () => done(),
      (err: unknown) => done(err as Error),
    );
  }

  override _destroy(err: Error | null, done: (error?: Error | null) => void): void {
    if (err) this.check.input.destroy(err);
    done(err);
  }
}
