import { pipeline, type Readable } from 'node:stream';
import { ObjectCipher, ObjectDecipher } from '../format/encryption.js';
import type { KeyRing } from '../format/encryption-keys.js';
import { parseSnapshotName } from '../format/snapshot-name.js';
import type { GetOptions, PutOptions, SnapStore, StoredObject } from './snapstore.js';

/** Object metadata key of the id of the key an object is encrypted with, for people and tools without the key. */
export const METADATA_ENCRYPTION_KEY_ID = 'encryption-key-id';

/**
 * Client-side encryption as a wrapper around any store (docs/encryption.md), outside the retries so that a resumed
 * download continues the stored bytes. With keys, snapshots are encrypted as they are put (after compression: the
 * callers compress); other objects (the store lock) stay plain, so that gc and list need no key. Every get
 * decrypts what is encrypted and passes the rest through, so a store of plain and encrypted snapshots reads as
 * one; without keys, an encrypted object fails with an EncryptionKeyError that names it and its key id.
 *
 * What callers record and check (our sha256 of the stored bytes, sizes read back) is of the bytes they put and get:
 * the compressed snapshot, before encryption.
 */
export class EncryptedStore implements SnapStore {
  readonly location: string;
  putFile?: SnapStore['putFile'];

  constructor(
    private readonly inner: SnapStore,
    private readonly keys: KeyRing | undefined,
  ) {
    this.location = inner.location;
    // A file to encrypt is read through put; a plain one may still be moved into place.
    if (!keys && inner.putFile) this.putFile = inner.putFile.bind(inner);
  }

  async put(name: string, body: Readable, options: PutOptions = {}): Promise<void> {
    if (!this.keys || !parseSnapshotName(name)) return this.inner.put(name, body, options);
    const key = this.keys.current;
    const sealed = pipeline(body, new ObjectCipher(key), () => {});
    const metadata = { ...options.metadata, [METADATA_ENCRYPTION_KEY_ID]: key.id };
    try {
      await this.inner.put(name, sealed, { ...options, metadata });
    } catch (err) {
      sealed.destroy();
      throw err;
    }
  }

  async get(name: string, options: GetOptions = {}): Promise<Readable> {
    // A read from an offset resumes a download of the stored bytes, so it gives them as stored; no program reads
    // part of a snapshot otherwise.
    if (options.offset) return this.inner.get(name, options);
    const raw = await this.inner.get(name);
    return pipeline(raw, new ObjectDecipher(this.keys, `${this.location}/${name}`), () => {});
  }

  list(prefix?: string): Promise<StoredObject[]> {
    return this.inner.list(prefix);
  }

  stat(name: string): Promise<StoredObject | undefined> {
    return this.inner.stat(name);
  }

  delete(name: string): Promise<void> {
    return this.inner.delete(name);
  }

  /** The store this one wraps, for provider-specific operations. */
  unwrap(): SnapStore {
    return this.inner;
  }

  async close(): Promise<void> {
    await this.inner.close?.();
  }
}

/** Whether a stream a store's get returned was decrypted: its length then differs from the listed size. */
export function wasDecrypted(body: Readable): boolean {
  return body instanceof ObjectDecipher && body.encrypted;
}
