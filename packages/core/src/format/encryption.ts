import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { Transform, type TransformCallback, Writable } from 'node:stream';
import { ByteQueue } from '../common/byte-queue.js';
import { IntegrityError, OperationError } from '../common/errors.js';
import { type EncryptionKey, KEY_ID, type KeyRing } from './encryption-keys.js';

/**
 * An encrypted object (docs/encryption.md §1): a header, then the content in chunks of `chunkSize` bytes, each
 * AES-256-GCM under the object's own random data key, with the whole header as additional data:
 *
 *   magic (8) · version (1) · key id length (1) · key id · chunk size (u32 BE) · nonce prefix (7)
 *   · data key wrapped by the key-encryption key: nonce (12), ciphertext (32), tag (16)
 *   · chunks: ciphertext (chunk size; the last one shorter or empty) · tag (16)
 *   · name seal: the object's name in the store (UTF-8) · its length (1) · tag (16)
 *
 * A chunk's nonce is the nonce prefix, its index (u32 BE) and a flag byte that is 1 on the last chunk only, so a
 * chunk moved elsewhere, a tail cut at a chunk boundary or a header changed fails authentication. The name seal
 * is an empty GCM message under the data key with the header and the name as additional data (flag byte 2): the
 * data key is the object's own, so an object stored under another name than it was written for is told apart
 * from damage. It comes last because a full snapshot's name carries the revision, known only once all of it has
 * been read, and it is encrypted on that same pass (take-full-snapshot.ts).
 */
export const ENCRYPTION_MAGIC = Buffer.from([0xe5, 0x53, 0x45, 0x4e, 0x43, 0x0d, 0x0a, 0x1a]);
const VERSION = 2;
const NONCE_PREFIX = 7;
const WRAP_NONCE = 12;
const KEY_BYTES = 32;
const TAG = 16;
/** Bytes of the header after the key id. */
const HEADER_TAIL = 4 + NONCE_PREFIX + WRAP_NONCE + KEY_BYTES + TAG;
/** A name seal's longest: names are at most 255 bytes (ours are about 50). */
const MAX_NAME = 255;
const MAX_NAME_SEAL = MAX_NAME + 1 + TAG;
/** The chunk index and flag of the name seal's nonce: no chunk has them. */
const NAME_SEAL_INDEX = 0xffffffff;
const NAME_SEAL_FLAG = 2;

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

/** What an encrypted object's header says; the fields before the wrapped key are its additional data. */
interface EnvelopeHeader {
  /** The whole header: every chunk's additional data. */
  bytes: Buffer;
  keyId: string;
  chunkSize: number;
  noncePrefix: Buffer;
  clear: Buffer;
  wrapNonce: Buffer;
  wrapped: Buffer;
  wrapTag: Buffer;
}

/**
 * Takes an encrypted object's header from the front of `queue` once it is all there (undefined while more bytes
 * are needed), or says the object is plain. Store contents are untrusted: every field is checked before use.
 */
function takeHeader(queue: ByteQueue, label: string): EnvelopeHeader | 'plain' | undefined {
  const head = queue.peek(ENCRYPTION_MAGIC.length + 2);
  if (head.length < ENCRYPTION_MAGIC.length) return undefined;
  if (!isEncrypted(head)) return 'plain';
  if (head.length < ENCRYPTION_MAGIC.length + 2) return undefined;
  if (head[8] !== VERSION) {
    throw new IntegrityError(
      `${label} is encrypted in format version ${head[8]}, which this version does not read (it reads ${VERSION}): use the etcd-steward that wrote it`,
    );
  }
  const idLength = head[9];
  const size = ENCRYPTION_MAGIC.length + 2 + idLength + HEADER_TAIL;
  if (queue.length < size) return undefined;
  const bytes = queue.take(size);
  const idAt = ENCRYPTION_MAGIC.length + 2;
  const prefixAt = idAt + idLength + 4;
  const wrapAt = prefixAt + NONCE_PREFIX;
  const keyId = bytes.subarray(idAt, idAt + idLength).toString('utf8');
  if (!KEY_ID.test(keyId)) throw new IntegrityError(`${label} is damaged: its encryption header names no valid key id`);
  const chunkSize = bytes.readUInt32BE(idAt + idLength);
  if (chunkSize < MIN_CHUNK || chunkSize > MAX_CHUNK) {
    throw new IntegrityError(`${label} is damaged: its encryption header gives a chunk size of ${chunkSize}`);
  }
  return {
    bytes,
    keyId,
    chunkSize,
    noncePrefix: bytes.subarray(prefixAt, wrapAt),
    clear: bytes.subarray(0, wrapAt),
    wrapNonce: bytes.subarray(wrapAt, wrapAt + WRAP_NONCE),
    wrapped: bytes.subarray(wrapAt + WRAP_NONCE, wrapAt + WRAP_NONCE + KEY_BYTES),
    wrapTag: bytes.subarray(wrapAt + WRAP_NONCE + KEY_BYTES),
  };
}

/** An object's last bytes parted into its chunks and its name seal; an IntegrityError when too short for both. */
function splitNameSeal(rest: Buffer, label: string): { chunks: Buffer; name: Buffer; tag: Buffer } {
  const length = rest.length > TAG ? rest[rest.length - 1 - TAG] : 0;
  const chunks = rest.length - TAG - 1 - length;
  if (rest.length <= TAG || chunks < TAG) {
    throw new IntegrityError(`${label} is cut short: its last chunk or the seal of its name is missing`);
  }
  return {
    chunks: rest.subarray(0, chunks),
    name: rest.subarray(chunks, chunks + length),
    tag: rest.subarray(rest.length - TAG),
  };
}

/**
 * The object's data key, unwrapped with the key its header names: an EncryptionKeyError when the keys lack that id,
 * an IntegrityError when they hold it and the header does not authenticate.
 */
function unwrapDataKey(envelope: EnvelopeHeader, keys: KeyRing | undefined, label: string): Buffer {
  const id = envelope.keyId;
  if (!keys) {
    throw new EncryptionKeyError(
      `${label} is encrypted with key "${id}": give --encryption-key-file with a file that holds that key`,
    );
  }
  const kek = keys.byId(id);
  if (!kek) {
    throw new EncryptionKeyError(
      `${label} is encrypted with key "${id}", which ${keys.source} does not hold: add that key to the file (keep old keys while objects use them)`,
    );
  }
  try {
    const unwrap = createDecipheriv('aes-256-gcm', kek.key, envelope.wrapNonce)
      .setAAD(envelope.clear)
      .setAuthTag(envelope.wrapTag);
    return Buffer.concat([unwrap.update(envelope.wrapped), unwrap.final()]);
  } catch (err) {
    // The key ring holds the id: a tag that does not check is a changed header (the usual case, and a restore then
    // falls back to an older full as past any damage), or another key under that id, which every object shows alike.
    throw new IntegrityError(
      `${label} is damaged: its encryption header does not authenticate with key "${id}" of ${keys.source} (a changed byte, or the file holds another key under that id)`,
      { cause: err },
    );
  }
}

/**
 * An encrypted object's header alone (as `EnvelopeCheck` gives it), checked: its key id, or an IntegrityError
 * when it is not a whole header of this version. With `keys`, its data key is unwrapped too, so that a missing key
 * (EncryptionKeyError) or a header that does not authenticate (IntegrityError) is told before any of the object is read.
 */
export function checkEnvelopeHeader(header: Buffer, label: string, keys?: KeyRing): string {
  const queue = new ByteQueue();
  queue.push(header);
  const envelope = takeHeader(queue, label);
  if (typeof envelope !== 'object' || queue.length > 0) {
    throw new IntegrityError(`${label} is damaged: its encryption header is not one`);
  }
  if (keys) unwrapDataKey(envelope, keys, label);
  return envelope.keyId;
}

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
   * `plainAllowed`, when given, is asked before any byte of an object that turns out to be plain passes, and
   * rejects to refuse it (store/plain-substitutes.ts).
   */
  constructor(
    private readonly keys: KeyRing | undefined,
    private readonly name: string,
    private readonly label = name,
    private readonly plainAllowed?: () => Promise<void>,
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
      done(err as Error);
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
    if (!this.plainAllowed) return done(null, this.queue.take(this.queue.length));
    this.plainAllowed().then(() => done(null, this.queue.take(this.queue.length)), done);
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

/** A prefix of the magic, too short to tell yet. */
function startsLikeHeader(queue: ByteQueue): boolean {
  const head = queue.peek(ENCRYPTION_MAGIC.length);
  return (
    head.length > 0 && head.length < ENCRYPTION_MAGIC.length && ENCRYPTION_MAGIC.subarray(0, head.length).equals(head)
  );
}

/** A name as a name seal holds it. */
function nameBytes(name: string): Buffer {
  const bytes = Buffer.from(name, 'utf8');
  if (bytes.length === 0 || bytes.length > MAX_NAME)
    throw new Error(`an object name of ${bytes.length} bytes cannot be sealed`);
  return bytes;
}

function nameSealNonce(prefix: Buffer): Buffer {
  const nonce = chunkNonce(prefix, NAME_SEAL_INDEX, false);
  nonce[11] = NAME_SEAL_FLAG;
  return nonce;
}

function chunkNonce(prefix: Buffer, index: number, last: boolean): Buffer {
  const nonce = Buffer.alloc(12);
  prefix.copy(nonce, 0);
  nonce.writeUInt32BE(index, NONCE_PREFIX);
  nonce[11] = last ? 1 : 0;
  return nonce;
}
