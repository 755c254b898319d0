import { createDecipheriv } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { ByteQueue } from '../../common/byte-queue.js';
import { IntegrityError } from '../../common/errors.js';
import type { KeyRing } from './encryption-keys.js';
import {
  chunkNonce,
  ENCRYPTION_MAGIC,
  isEncrypted,
  MAX_NAME_SEAL,
  nameSealNonce,
  splitNameSeal,
  startsLikeHeader,
  TAG,
  UnknownKeyIdError,
} from './envelope-format.js';
import { type EnvelopeHeader, takeHeader, unwrapDataKey } from './envelope-header.js';

/**
 * Decrypts an object read from a store, or passes it through unchanged when it is not encrypted, so that a store
 * holding both kinds reads as one. Nothing of a chunk leaves before its tag is checked, and the last chunk only
 * once the name seal says the object was written as `name`. `label` names the object in errors; a missing or
 * wrong key is an EncryptionKeyError, damage (a moved or swapped object too) an IntegrityError.
 */
export class ObjectDecipher extends Transform {
  private readonly queue = new ByteQueue();
  private mode: 'head' | 'plain' | 'chunks' = 'head';
  private envelope?: EnvelopeHeader;
  private dataKey: Buffer = Buffer.alloc(0);
  private index = 0;
  /** The key id the object names, once its header is read. */
  keyId?: string;

  /**
   * `judges.plainAllowed`, when given, is asked before any byte of an object that turns out to be plain passes, and
   * rejects to refuse it (store/plain-substitutes.ts). `judges.unknownKeyId` gives the error to fail with when the
   * keys lack the id the header names: damage or a missing key (store/encrypted-store.ts).
   */
  constructor(
    private readonly keys: KeyRing | undefined,
    private readonly name: string,
    private readonly label = name,
    private readonly judges: {
      plainAllowed?: () => Promise<void>;
      unknownKeyId?: (err: UnknownKeyIdError) => Promise<Error>;
    } = {},
  ) {
    super();
  }

  /** Whether the object turned out to be encrypted (known once its first bytes have passed). */
  get encrypted(): boolean {
    return this.mode === 'chunks';
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      if (this.mode === 'plain') return done(null, chunk);
      this.queue.push(chunk);
      if (this.mode === 'head') {
        const found = takeHeader(this.queue, this.label);
        if (found === undefined) return done();
        if (found === 'plain') {
          this.mode = 'plain';
          return this.passPlain(done);
        }
        this.begin(found);
      }
      // The name seal is found from the end, so what may be part of it stays until the end.
      const sealed = (this.envelope as EnvelopeHeader).chunkSize + TAG;
      while (this.queue.length > sealed + MAX_NAME_SEAL) this.open(this.queue.take(sealed), false);
      done();
    } catch (err) {
      const judge = this.judges.unknownKeyId;
      if (err instanceof UnknownKeyIdError && judge) judge(err).then(done, done);
      else done(err as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    try {
      if (this.mode === 'head') {
        // Shorter than a header: plain if it does not start like one.
        if (!isEncrypted(this.queue.peek(ENCRYPTION_MAGIC.length)) && !startsLikeHeader(this.queue)) {
          return this.passPlain(done);
        }
        throw new IntegrityError(`${this.label} is cut short: its encryption header is incomplete`);
      }
      if (this.mode === 'chunks') {
        const { chunks, name, tag } = splitNameSeal(this.queue.take(this.queue.length), this.label);
        this.checkName(name, tag);
        const sealed = (this.envelope as EnvelopeHeader).chunkSize + TAG;
        let at = 0;
        for (; chunks.length - at > sealed; at += sealed) this.open(chunks.subarray(at, at + sealed), false);
        this.open(chunks.subarray(at), true);
      }
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  /** What has come of a plain object, once it may pass. */
  private passPlain(done: TransformCallback): void {
    const { plainAllowed } = this.judges;
    if (!plainAllowed) return done(null, this.queue.take(this.queue.length));
    plainAllowed().then(() => done(null, this.queue.take(this.queue.length)), done);
  }

  private begin(envelope: EnvelopeHeader): void {
    this.keyId = envelope.keyId;
    this.dataKey = unwrapDataKey(envelope, this.keys, this.label);
    this.envelope = envelope;
    this.mode = 'chunks';
  }

  /** The name seal authenticated, then compared: a sound object under another name was moved or swapped. */
  private checkName(name: Buffer, tag: Buffer): void {
    const envelope = this.envelope as EnvelopeHeader;
    const decipher = createDecipheriv('aes-256-gcm', this.dataKey, nameSealNonce(envelope.noncePrefix));
    decipher.setAAD(Buffer.concat([envelope.bytes, name])).setAuthTag(tag);
    try {
      decipher.final();
    } catch (err) {
      throw new IntegrityError(
        `${this.label} is damaged: the seal of its name does not authenticate (changed or cut short)`,
        {
          cause: err,
        },
      );
    }
    const written = name.toString('utf8');
    if (written !== this.name) {
      throw new IntegrityError(
        `${this.label} was encrypted as ${written}: it was moved or swapped; put it back under that name, or delete it`,
      );
    }
  }

  private open(sealed: Buffer, last: boolean): void {
    const index = this.index++;
    const { bytes, noncePrefix } = this.envelope as EnvelopeHeader;
    const decipher = createDecipheriv('aes-256-gcm', this.dataKey, chunkNonce(noncePrefix, index, last));
    decipher.setAAD(bytes).setAuthTag(sealed.subarray(sealed.length - TAG));
    const plain = decipher.update(sealed.subarray(0, sealed.length - TAG));
    try {
      decipher.final();
    } catch (err) {
      throw new IntegrityError(
        `${this.label} is damaged: its encrypted chunk ${index} does not authenticate (changed, moved or cut short)`,
        { cause: err },
      );
    }
    this.push(plain);
  }
}
