import { createCipheriv, randomBytes } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { ByteQueue } from '../../common/byte-queue.js';
import type { EncryptionKey } from './encryption-keys.js';
import {
  chunkNonce,
  DEFAULT_CHUNK_SIZE,
  ENCRYPTION_MAGIC,
  KEY_BYTES,
  NONCE_PREFIX,
  nameBytes,
  nameSealNonce,
  VERSION,
  WRAP_NONCE,
} from './envelope-format.js';

/**
 * Encrypts a stream under a fresh data key wrapped by `kek`, for the object `name` (its name in the store, e.g.
 * `v2/Full-…`). Without a name, the stream ends before the name seal, which `nameSeal` gives once the name is known.
 */
export class ObjectCipher extends Transform {
  private readonly queue = new ByteQueue();
  private readonly dataKey = randomBytes(KEY_BYTES);
  private readonly header: Buffer;
  private readonly noncePrefix = randomBytes(NONCE_PREFIX);
  private index = 0;
  private nameSealed = false;

  constructor(
    kek: EncryptionKey,
    private readonly name?: string,
    private readonly chunkSize = DEFAULT_CHUNK_SIZE,
  ) {
    super();
    if (name !== undefined) nameBytes(name);
    const id = Buffer.from(kek.id, 'utf8');
    const fixed = Buffer.alloc(4);
    fixed.writeUInt32BE(chunkSize);
    const clear = Buffer.concat([ENCRYPTION_MAGIC, Buffer.from([VERSION, id.length]), id, fixed, this.noncePrefix]);
    const wrapNonce = randomBytes(WRAP_NONCE);
    const wrap = createCipheriv('aes-256-gcm', kek.key, wrapNonce).setAAD(clear);
    const wrapped = Buffer.concat([wrap.update(this.dataKey), wrap.final()]);
    this.header = Buffer.concat([clear, wrapNonce, wrapped, wrap.getAuthTag()]);
    this.push(this.header);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.queue.push(chunk);
    // A full chunk waits until more follows: only then is it known not to be the last.
    while (this.queue.length > this.chunkSize) this.seal(this.queue.take(this.chunkSize), false);
    done();
  }

  override _flush(done: TransformCallback): void {
    this.seal(this.queue.take(this.queue.length), true);
    if (this.name !== undefined) this.push(this.nameSeal(this.name));
    done();
  }

  /**
   * The bytes that end the object, binding it to `name`; once only: its nonce is fixed, and two GCM tags under one
   * nonce give away the key that authenticates every chunk of the object.
   */
  nameSeal(name: string): Buffer {
    if (this.nameSealed) throw new Error('an encrypted object is sealed with its name once only');
    this.nameSealed = true;
    const bytes = nameBytes(name);
    const cipher = createCipheriv('aes-256-gcm', this.dataKey, nameSealNonce(this.noncePrefix));
    cipher.setAAD(Buffer.concat([this.header, bytes]));
    cipher.final();
    return Buffer.concat([bytes, Buffer.from([bytes.length]), cipher.getAuthTag()]);
  }

  private seal(plain: Buffer, last: boolean): void {
    const cipher = createCipheriv('aes-256-gcm', this.dataKey, chunkNonce(this.noncePrefix, this.index++, last));
    cipher.setAAD(this.header);
    this.push(cipher.update(plain));
    cipher.final(); // GCM gives everything from update
    this.push(cipher.getAuthTag());
  }
}
