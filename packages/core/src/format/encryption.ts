import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { IntegrityError, OperationError } from '../common/errors.js';
import { type EncryptionKey, KEY_ID, type KeyRing } from './encryption-keys.js';

/**
 * An encrypted object (docs/encryption.md §1): a header, then the content in chunks of `chunkSize` bytes, each
 * AES-256-GCM under the object's own random data key, with the whole header as additional data:
 *
 *   magic (8) · version (1) · key id length (1) · key id · chunk size (u32 BE) · nonce prefix (7)
 *   · data key wrapped by the key-encryption key: nonce (12), ciphertext (32), tag (16)
 *   · chunks: ciphertext (chunk size; the last one shorter or empty) · tag (16)
 *
 * A chunk's nonce is the nonce prefix, its index (u32 BE) and a flag byte that is 1 on the last chunk only, so a
 * chunk moved elsewhere, a tail cut at a chunk boundary or a header changed fails authentication.
 */
export const ENCRYPTION_MAGIC = Buffer.from([0xe5, 0x53, 0x45, 0x4e, 0x43, 0x0d, 0x0a, 0x1a]);
const VERSION = 1;
const NONCE_PREFIX = 7;
const WRAP_NONCE = 12;
const KEY_BYTES = 32;
const TAG = 16;
/** Bytes of the header after the key id. */
const HEADER_TAIL = 4 + NONCE_PREFIX + WRAP_NONCE + KEY_BYTES + TAG;

/** Memory per stream is about one chunk each way; GCM's cost a chunk does not depend on its size. */
export const DEFAULT_CHUNK_SIZE = 256 << 10;
/** The chunk sizes a reader accepts from a header: store contents are untrusted, so memory stays bounded. */
const MIN_CHUNK = 1 << 10;
const MAX_CHUNK = 16 << 20;

/** An object that cannot be opened with the keys at hand: a missing or wrong key (exit 1, no fallback to older). */
export class EncryptionKeyError extends OperationError {}

/** Whether `head` (an object's first bytes, at least 8) starts an encrypted object. */
export function isEncrypted(head: Buffer): boolean {
  return head.length >= ENCRYPTION_MAGIC.length && head.subarray(0, ENCRYPTION_MAGIC.length).equals(ENCRYPTION_MAGIC);
}

/** Encrypts a stream under a fresh data key wrapped by `kek`. */
export class ObjectCipher extends Transform {
  private readonly queue = new ByteQueue();
  private readonly dataKey = randomBytes(KEY_BYTES);
  private readonly header: Buffer;
  private readonly noncePrefix = randomBytes(NONCE_PREFIX);
  private index = 0;

  constructor(
    kek: EncryptionKey,
    private readonly chunkSize = DEFAULT_CHUNK_SIZE,
  ) {
    super();
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
    done();
  }

  private seal(plain: Buffer, last: boolean): void {
    const cipher = createCipheriv('aes-256-gcm', this.dataKey, chunkNonce(this.noncePrefix, this.index++, last));
    cipher.setAAD(this.header);
    this.push(cipher.update(plain));
    cipher.final(); // GCM gives everything from update
    this.push(cipher.getAuthTag());
  }
}

/**
 * Decrypts an object read from a store, or passes it through unchanged when it is not encrypted, so that a store
 * holding both kinds reads as one. Nothing of a chunk leaves before its tag is checked. `label` names the object
 * in errors; a missing or wrong key is an EncryptionKeyError, damage an IntegrityError.
 */
export class ObjectDecipher extends Transform {
  private readonly queue = new ByteQueue();
  private mode: 'head' | 'plain' | 'chunks' = 'head';
  private header: Buffer = Buffer.alloc(0);
  private dataKey: Buffer = Buffer.alloc(0);
  private noncePrefix: Buffer = Buffer.alloc(0);
  private chunkSize = 0;
  private index = 0;
  /** The key id the object names, once its header is read. */
  keyId?: string;

  constructor(
    private readonly keys: KeyRing | undefined,
    private readonly label: string,
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
        const found = this.readHeader();
        if (found === undefined) return done();
        if (found === 'plain') return done(null, this.queue.take(this.queue.length));
      }
      const sealed = this.chunkSize + TAG;
      while (this.queue.length > sealed) this.open(this.queue.take(sealed), false);
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    try {
      if (this.mode === 'head') {
        // Shorter than a header: plain if it does not start like one.
        if (!isEncrypted(this.queue.peek(ENCRYPTION_MAGIC.length)) && !this.startsLikeHeader()) {
          return done(null, this.queue.take(this.queue.length));
        }
        throw new IntegrityError(`${this.label} is cut short: its encryption header is incomplete`);
      }
      if (this.mode === 'chunks') {
        if (this.queue.length < TAG) throw new IntegrityError(`${this.label} is cut short: its last chunk is missing`);
        this.open(this.queue.take(this.queue.length), true);
      }
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  /** A prefix of the magic, too short to tell yet. */
  private startsLikeHeader(): boolean {
    const head = this.queue.peek(ENCRYPTION_MAGIC.length);
    return (
      head.length > 0 && head.length < ENCRYPTION_MAGIC.length && ENCRYPTION_MAGIC.subarray(0, head.length).equals(head)
    );
  }

  /** Reads the header once it is all there: what the object is, undefined while more bytes are needed. */
  private readHeader(): 'plain' | 'chunks' | undefined {
    const head = this.queue.peek(ENCRYPTION_MAGIC.length + 2);
    if (head.length < ENCRYPTION_MAGIC.length) return undefined;
    if (!isEncrypted(head)) {
      this.mode = 'plain';
      return this.mode;
    }
    if (head.length < ENCRYPTION_MAGIC.length + 2) return undefined;
    if (head[8] !== VERSION) {
      throw new IntegrityError(
        `${this.label} is encrypted in format version ${head[8]}, which this version does not read: use a newer etcd-steward`,
      );
    }
    const idLength = head[9];
    const size = ENCRYPTION_MAGIC.length + 2 + idLength + HEADER_TAIL;
    if (this.queue.length < size) return undefined;
    const header = this.queue.take(size);
    const idAt = ENCRYPTION_MAGIC.length + 2;
    const prefixAt = idAt + idLength + 4;
    const wrapAt = prefixAt + NONCE_PREFIX;
    const id = header.subarray(idAt, idAt + idLength).toString('utf8');
    if (!KEY_ID.test(id)) {
      throw new IntegrityError(`${this.label} is damaged: its encryption header names no valid key id`);
    }
    this.keyId = id;
    const chunkSize = header.readUInt32BE(idAt + idLength);
    if (chunkSize < MIN_CHUNK || chunkSize > MAX_CHUNK) {
      throw new IntegrityError(`${this.label} is damaged: its encryption header gives a chunk size of ${chunkSize}`);
    }
    const clear = header.subarray(0, wrapAt);
    const wrapNonce = header.subarray(wrapAt, wrapAt + WRAP_NONCE);
    const wrapped = header.subarray(wrapAt + WRAP_NONCE, wrapAt + WRAP_NONCE + KEY_BYTES);
    const tag = header.subarray(wrapAt + WRAP_NONCE + KEY_BYTES);
    const kek = this.keyFor(id);
    try {
      const unwrap = createDecipheriv('aes-256-gcm', kek.key, wrapNonce).setAAD(clear).setAuthTag(tag);
      this.dataKey = Buffer.concat([unwrap.update(wrapped), unwrap.final()]);
    } catch (err) {
      throw new EncryptionKeyError(
        `${this.label} does not open with key "${id}" of ${this.keys?.source}: the file holds another key under that id, or the object's header is damaged`,
        { cause: err },
      );
    }
    this.header = header;
    this.noncePrefix = header.subarray(prefixAt, wrapAt);
    this.chunkSize = chunkSize;
    this.mode = 'chunks';
    return this.mode;
  }

  private keyFor(id: string): EncryptionKey {
    if (!this.keys) {
      throw new EncryptionKeyError(
        `${this.label} is encrypted with key "${id}": give --encryption-key-file with a file that holds that key`,
      );
    }
    const key = this.keys.byId(id);
    if (!key) {
      throw new EncryptionKeyError(
        `${this.label} is encrypted with key "${id}", which ${this.keys.source} does not hold: add that key to the file (keep old keys while objects use them)`,
      );
    }
    return key;
  }

  private open(sealed: Buffer, last: boolean): void {
    const index = this.index++;
    const decipher = createDecipheriv('aes-256-gcm', this.dataKey, chunkNonce(this.noncePrefix, index, last));
    decipher.setAAD(this.header).setAuthTag(sealed.subarray(sealed.length - TAG));
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

function chunkNonce(prefix: Buffer, index: number, last: boolean): Buffer {
  const nonce = Buffer.alloc(12);
  prefix.copy(nonce, 0);
  nonce.writeUInt32BE(index, NONCE_PREFIX);
  nonce[11] = last ? 1 : 0;
  return nonce;
}

/** Bytes received in pieces and taken out in sizes of our choosing, copying only when a take spans pieces. */
class ByteQueue {
  private readonly pieces: Buffer[] = [];
  length = 0;

  push(piece: Buffer): void {
    if (piece.length === 0) return;
    this.pieces.push(piece);
    this.length += piece.length;
  }

  /** Up to `n` bytes from the front, left in the queue. */
  peek(n: number): Buffer {
    const first = this.pieces[0];
    if (first && first.length >= n) return first.subarray(0, n);
    return Buffer.concat(this.pieces, Math.min(n, this.length)).subarray(0, n);
  }

  take(n: number): Buffer {
    this.length -= n;
    const first = this.pieces[0];
    if (first && first.length >= n) {
      if (first.length === n) this.pieces.shift();
      else this.pieces[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const piece = this.pieces[0];
      const used = Math.min(piece.length, n - at);
      piece.copy(out, at, 0, used);
      at += used;
      if (used === piece.length) this.pieces.shift();
      else this.pieces[0] = piece.subarray(used);
    }
    return out;
  }
}
