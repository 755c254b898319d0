import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { pipeline, type Readable } from 'node:stream';
import { IntegrityError } from '../common/errors.js';
import type { KeyRing } from '../format/encryption/encryption-keys.js';
import type { UnknownKeyIdError } from '../format/encryption/envelope-format.js';
import { headerKeyId, KEY_ID_HEAD } from '../format/encryption/envelope-header.js';
import { ObjectCipher } from '../format/encryption/object-cipher.js';
import { ObjectDecipher } from '../format/encryption/object-decipher.js';
import { parseSnapshotName } from '../format/snapshot-name.js';
import { METADATA_ENCRYPTION_KEY_ID } from './metadata.js';
import { PlainSubstitutes, readHead } from './plain-substitutes.js';
import {
  type CopySource,
  type GetOptions,
  ObjectNotFoundError,
  type ObjectVersion,
  type PutOptions,
  type SnapStore,
  type StatOptions,
  type StoredObject,
  type StoreProtection,
} from './snapstore.js';

export { METADATA_ENCRYPTION_KEY_ID };

/**
 * Client-side encryption as a wrapper around any store (docs/encryption.md), outside the retries so that a resumed
 * download continues the stored bytes. With keys, snapshots are encrypted as they are put (after compression: the
 * callers compress); other objects (the store lock) stay plain, so that gc and list need no key. Every get
 * decrypts what is encrypted and passes the rest through, so a store of plain and encrypted snapshots reads as
 * one (with keys, but for plain snapshots newer than its first encrypted one: plain-substitutes.ts); without keys, an
 * encrypted object fails with an EncryptionKeyError that names it and its key id, and so it does with keys that lack
 * its id, unless that id is damage (judgeUnknownKeyId).
 *
 * What callers record and check (our sha256 of the stored bytes, sizes read back) is of the bytes they put and get:
 * the compressed snapshot, before encryption.
 */
export class EncryptedStore implements SnapStore {
  readonly location: string;
  /** With keys, a plain snapshot newer than the store's first encrypted one is refused as a substitute. */
  private readonly plainSubstitutes: PlainSubstitutes;

  constructor(
    private readonly inner: SnapStore,
    private readonly keys: KeyRing | undefined,
  ) {
    this.location = inner.location;
    this.plainSubstitutes = new PlainSubstitutes(inner);
  }

  sealer(): ObjectCipher | undefined {
    return this.keys && new ObjectCipher(this.keys.current);
  }

  async put(name: string, body: Readable, options: PutOptions = {}): Promise<void> {
    const { sealed, ...rest } = options;
    if (!this.keys || !parseSnapshotName(name)) return this.inner.put(name, body, rest);
    if (sealed) return this.inner.put(name, body, this.withKeyId(rest));
    const stream = pipeline(body, new ObjectCipher(this.keys.current, name), () => {});
    try {
      await this.inner.put(name, stream, this.withKeyId(rest));
    } catch (err) {
      stream.destroy();
      throw err;
    }
  }

  /** Only without keys: with them, what get and put pass on is not what the stored object holds. */
  copySource(name: string): CopySource | undefined {
    return this.keys ? undefined : this.inner.copySource?.(name);
  }

  get putCopy(): SnapStore['putCopy'] {
    return this.keys ? undefined : this.inner.putCopy?.bind(this.inner);
  }

  /** A file to encrypt is read through put; a plain or sealed one may still be moved into place. */
  async putFile(name: string, path: string, options: PutOptions = {}): Promise<void> {
    const { sealed, ...rest } = options;
    const encrypt = this.keys !== undefined && parseSnapshotName(name) !== undefined;
    if (this.inner.putFile && (!encrypt || sealed)) {
      return this.inner.putFile(name, path, encrypt ? this.withKeyId(rest) : rest);
    }
    await this.put(name, createReadStream(path), options);
    await rm(path, { force: true });
  }

  private withKeyId(options: PutOptions): PutOptions {
    const id = (this.keys as KeyRing).current.id;
    return { ...options, metadata: { ...options.metadata, [METADATA_ENCRYPTION_KEY_ID]: id } };
  }

  async get(name: string, options: GetOptions = {}): Promise<Readable> {
    // A read from an offset resumes a download of the stored bytes, so it gives them as stored; no program reads
    // part of a snapshot otherwise.
    const { versionId } = options;
    if (options.offset || options.raw) return this.inner.get(name, { offset: options.offset, versionId });
    const raw = await this.inner.get(name, { versionId });
    const label = `${this.location}/${name}`;
    const keys = this.keys;
    const judges = keys && {
      plainAllowed: () => this.plainSubstitutes.check(name, label),
      unknownKeyId: (err: UnknownKeyIdError) => judgeUnknownKeyId(this.inner, keys, name, err, label),
    };
    return pipeline(raw, new ObjectDecipher(this.keys, name, label, judges), () => {});
  }

  list(prefix?: string): Promise<StoredObject[]> {
    return this.inner.list(prefix);
  }

  stat(name: string, options?: StatOptions): Promise<StoredObject | undefined> {
    return this.inner.stat(name, options);
  }

  /** Present only where the provider keeps versions (an optional SnapStore method). */
  get listVersions(): ((prefix?: string) => Promise<ObjectVersion[] | undefined>) | undefined {
    return this.inner.listVersions?.bind(this.inner);
  }

  get protection(): (() => Promise<StoreProtection>) | undefined {
    return this.inner.protection?.bind(this.inner);
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

/** Heads read at once while the store's key ids are gathered. */
const KEY_ID_READS = 8;

/**
 * The error an object `name` whose key id `keys` lack fails with (docs/encryption.md §2): `err` as it is for a key
 * missing from the file, an IntegrityError for damage. A key in use names every snapshot written while it came first
 * in a key file, so a rotation the file missed shows on others too, and a wrong key file names none of the store's
 * ids; an id no other snapshot names, in a store whose snapshots name ids the file holds, is a changed header.
 */
async function judgeUnknownKeyId(
  store: SnapStore,
  keys: KeyRing,
  name: string,
  err: UnknownKeyIdError,
  label: string,
): Promise<Error> {
  const listed = [...(await store.list('v2/')), ...(await store.list('v1/'))];
  const others = listed
    .flatMap((o) => {
      const ref = o.name !== name ? parseSnapshotName(o.name) : undefined;
      return ref
        ? [{ name: o.name, lastRevision: ref.lastRevision, keyId: o.metadata[METADATA_ENCRYPTION_KEY_ID] }]
        : [];
    })
    .sort((a, b) => b.lastRevision - a.lastRevision);
  const keyIdOf = async (other: string) => {
    try {
      return headerKeyId(await readHead(await store.get(other), KEY_ID_HEAD));
    } catch (cause) {
      // gone since the listing: it names no key any more
      if (cause instanceof ObjectNotFoundError) return undefined;
      throw cause;
    }
  };
  let held: string | undefined;
  // Newest first: a missing key names the snapshots around the one asked for, so most answers come early.
  for (let i = 0; i < others.length; i += KEY_ID_READS) {
    const ids = await Promise.all(others.slice(i, i + KEY_ID_READS).map((o) => o.keyId ?? keyIdOf(o.name)));
    if (ids.includes(err.keyId)) return err;
    held ??= ids.find((id) => id !== undefined && keys.byId(id));
  }
  if (held === undefined) return err;
  return new IntegrityError(
    `${label} is damaged: its encryption header names key "${err.keyId}", which ${keys.source} does not hold and no other snapshot of the store names, while others name keys it holds ("${held}"): a changed header. Were "${err.keyId}" a key of yours, add it to the file`,
  );
}
