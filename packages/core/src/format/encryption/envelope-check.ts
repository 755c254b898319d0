import { Writable } from 'node:stream';
import { ByteQueue } from '../../common/byte-queue.js';
import { IntegrityError } from '../../common/errors.js';
import {
  ENCRYPTION_MAGIC,
  isEncrypted,
  MAX_NAME_SEAL,
  splitNameSeal,
  startsLikeHeader,
  TAG,
} from './envelope-format.js';
import { type EnvelopeHeader, takeHeader } from './envelope-header.js';

/**
 * What can be checked of an encrypted object without its key, as its stored bytes are written here: a header this
 * version reads, and a name seal naming `name` (not authenticated: that needs the key). The tags are left to
 * whoever has the key; a digest of the stored bytes (store/stored-digest.ts) catches damage in between.
 */
export class EnvelopeCheck extends Writable {
  private readonly queue = new ByteQueue();
  private envelope?: EnvelopeHeader;
  /** The object's header, once read (checkEnvelopeHeader reads it). */
  header?: Buffer;
  /** The key id the header names. */
  keyId?: string;
  /** Set when the object turned out not to be encrypted (the check then fails at once). */
  plain = false;

  constructor(
    private readonly name: string,
    private readonly label = name,
  ) {
    super();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (error?: Error | null) => void): void {
    try {
      this.queue.push(chunk);
      if (!this.envelope) {
        const found = takeHeader(this.queue, this.label);
        if (found === 'plain') {
          this.plain = true;
          throw new IntegrityError(`${this.label} is not encrypted, though it should be`);
        }
        if (found === undefined) return done();
        this.envelope = found;
        this.header = found.bytes;
        this.keyId = found.keyId;
      }
      // Only the end matters from here: the last chunk's tag and the name seal.
      const keep = TAG + MAX_NAME_SEAL;
      if (this.queue.length > keep) this.queue.skip(this.queue.length - keep);
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  override _final(done: (error?: Error | null) => void): void {
    try {
      if (!this.envelope) {
        this.plain = !isEncrypted(this.queue.peek(ENCRYPTION_MAGIC.length)) && !startsLikeHeader(this.queue);
        throw new IntegrityError(`${this.label} is cut short: its encryption header is incomplete`);
      }
      const written = splitNameSeal(this.queue.take(this.queue.length), this.label).name.toString('utf8');
      if (written !== this.name) {
        throw new IntegrityError(
          /^[\x21-\x7e]+$/.test(written)
            ? `${this.label} was encrypted as ${written}: it was moved or swapped`
            : `${this.label} is damaged: the seal of its name names no object`,
        );
      }
      done();
    } catch (err) {
      done(err as Error);
    }
  }
}
