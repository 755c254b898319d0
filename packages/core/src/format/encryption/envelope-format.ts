import type { ByteQueue } from '../../common/byte-queue.js';
import { IntegrityError, OperationError } from '../../common/errors.js';

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
 *
 * The writer is object-cipher.ts, the reader object-decipher.ts, the check without a key envelope-check.ts; the
 * last two read a header through envelope-header.ts.
 */
export const ENCRYPTION_MAGIC = Buffer.from([0xe5, 0x53, 0x45, 0x4e, 0x43, 0x0d, 0x0a, 0x1a]);
export const VERSION = 2;
export const NONCE_PREFIX = 7;
export const WRAP_NONCE = 12;
export const KEY_BYTES = 32;
export const TAG = 16;
/** Bytes of the header after the key id. */
export const HEADER_TAIL = 4 + NONCE_PREFIX + WRAP_NONCE + KEY_BYTES + TAG;
/** A name seal's longest: names are at most 255 bytes (ours are about 50). */
const MAX_NAME = 255;
export const MAX_NAME_SEAL = MAX_NAME + 1 + TAG;
/** The chunk index and flag of the name seal's nonce: no chunk has them. */
const NAME_SEAL_INDEX = 0xffffffff;
const NAME_SEAL_FLAG = 2;

/** Memory per stream is about one chunk each way; GCM's cost a chunk does not depend on its size. */
export const DEFAULT_CHUNK_SIZE = 256 << 10;
/** The chunk sizes a reader accepts from a header: store contents are untrusted, so memory stays bounded. */
export const MIN_CHUNK = 1 << 10;
export const MAX_CHUNK = 16 << 20;

/** An object that cannot be opened with the keys at hand: a missing or wrong key (exit 1, no fallback to older). */
export class EncryptionKeyError extends OperationError {}

/**
 * An object whose header names a key id the key file does not hold: a key missing from the file, or an id that
 * damage changed, which only the store's other objects can tell apart (store/encrypted-store.ts).
 */
export class UnknownKeyIdError extends EncryptionKeyError {
  constructor(
    message: string,
    readonly keyId: string,
  ) {
    super(message);
  }
}

/** Whether `head` (an object's first bytes, at least 8) starts an encrypted object. */
export function isEncrypted(head: Buffer): boolean {
  return head.length >= ENCRYPTION_MAGIC.length && head.subarray(0, ENCRYPTION_MAGIC.length).equals(ENCRYPTION_MAGIC);
}

/** An object's last bytes parted into its chunks and its name seal; an IntegrityError when too short for both. */
export function splitNameSeal(rest: Buffer, label: string): { chunks: Buffer; name: Buffer; tag: Buffer } {
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

/** A prefix of the magic, too short to tell yet. */
export function startsLikeHeader(queue: ByteQueue): boolean {
  const head = queue.peek(ENCRYPTION_MAGIC.length);
  return (
    head.length > 0 && head.length < ENCRYPTION_MAGIC.length && ENCRYPTION_MAGIC.subarray(0, head.length).equals(head)
  );
}

/** A name as a name seal holds it. */
export function nameBytes(name: string): Buffer {
  const bytes = Buffer.from(name, 'utf8');
  if (bytes.length === 0 || bytes.length > MAX_NAME)
    throw new Error(`an object name of ${bytes.length} bytes cannot be sealed`);
  return bytes;
}

export function nameSealNonce(prefix: Buffer): Buffer {
  const nonce = chunkNonce(prefix, NAME_SEAL_INDEX, false);
  nonce[11] = NAME_SEAL_FLAG;
  return nonce;
}

export function chunkNonce(prefix: Buffer, index: number, last: boolean): Buffer {
  const nonce = Buffer.alloc(12);
  prefix.copy(nonce, 0);
  nonce.writeUInt32BE(index, NONCE_PREFIX);
  nonce[11] = last ? 1 : 0;
  return nonce;
}
