import { createDecipheriv } from 'node:crypto';
import { ByteQueue } from '../../common/byte-queue.js';
import { IntegrityError } from '../../common/errors.js';
import { KEY_ID, type KeyRing } from './encryption-keys.js';
import {
  ENCRYPTION_MAGIC,
  EncryptionKeyError,
  HEADER_TAIL,
  isEncrypted,
  KEY_BYTES,
  MAX_CHUNK,
  MIN_CHUNK,
  NONCE_PREFIX,
  UnknownKeyIdError,
  VERSION,
  WRAP_NONCE,
} from './envelope-format.js';

/** What an encrypted object's header says; the fields before the wrapped key are its additional data. */
export interface EnvelopeHeader {
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
export function takeHeader(queue: ByteQueue, label: string): EnvelopeHeader | 'plain' | undefined {
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

/**
 * The object's data key, unwrapped with the key its header names: an EncryptionKeyError without keys, an
 * UnknownKeyIdError when they lack that id, an IntegrityError when they hold it and the header does not authenticate.
 */
export function unwrapDataKey(envelope: EnvelopeHeader, keys: KeyRing | undefined, label: string): Buffer {
  const id = envelope.keyId;
  if (!keys) {
    throw new EncryptionKeyError(
      `${label} is encrypted with key "${id}": give --encryption-key-file with a file that holds that key`,
    );
  }
  const kek = keys.byId(id);
  if (!kek) {
    throw new UnknownKeyIdError(
      `${label} is encrypted with key "${id}", which ${keys.source} does not hold: add that key to the file (keep old keys while objects use them)`,
      id,
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

/** How many first bytes of an object headerKeyId needs: enough for the longest key id. */
export const KEY_ID_HEAD = ENCRYPTION_MAGIC.length + 2 + 64;

/** The key id an object's first KEY_ID_HEAD bytes (or all it has) name, or undefined when they name none. */
export function headerKeyId(head: Buffer): string | undefined {
  const at = ENCRYPTION_MAGIC.length + 2;
  if (!isEncrypted(head) || head.length < at || head[8] !== VERSION) return undefined;
  const id = head.subarray(at, at + head[at - 1]).toString('utf8');
  return KEY_ID.test(id) && Buffer.byteLength(id) === head[at - 1] ? id : undefined;
}
