import type { Readable } from 'node:stream';
import { OperationError } from '../common/errors.js';
import type { ObjectCipher } from '../format/encryption/object-cipher.js';

/** One object in a store, as a listing or stat returns it. `name` is relative to the store prefix. */
export interface StoredObject {
  name: string;
  size: number;
  lastModified: Date;
  /**
   * Object metadata (string values), e.g. our sha256 of the stored bytes. `stat` always has it; listings of
   * S3 stores leave it empty, because S3 listings do not carry it (a HEAD per object would).
   */
  metadata: Record<string, string>;
}

/** A listing's order, by name as bytes compare (not the locale's), whatever order the provider returned. */
export function byName(a: StoredObject, b: StoredObject): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export interface PutOptions {
  /** Keys lower-case `[a-z0-9-]`, starting with a letter, so that they survive every provider (see metadata.ts). */
  metadata?: Record<string, string>;
  /** Aborts the upload; the object must then not become visible. */
  signal?: AbortSignal;
  /**
   * Sends one request of the upload that can be sent again as it is: a part, a block, the commit. A stream
   * cannot be rewound, so the retry wrapper (retry.ts) retries these units rather than the whole put. Providers
   * send every such request through it and keep no retry logic of their own.
   */
  send?: RequestSender;
  /** The body came through this store's `sealer()`: it is stored as it is. */
  sealed?: boolean;
}

/** Where an object's bytes are, for a copy that does not pass them through this program (`SnapStore.putCopy`). */
export type CopySource = { kind: 'file'; path: string } | { kind: 's3'; endpoint: string; bucket: string; key: string };

/** Who made a copy that did not pass through this program: the kernel (two local stores), the store's server. */
export type CopyWay = 'kernel' | 'server';

/** Runs `request`, perhaps more than once; `signal` ends the waiting between attempts. */
export type RequestSender = <T>(request: () => Promise<T>, signal?: AbortSignal) => Promise<T>;

/** The sender a provider uses when no retry wrapper handed it one: each request once. */
export const sendOnce: RequestSender = (request) => request();

export interface GetOptions {
  /** Start reading at this byte: the retry wrapper resumes an interrupted download with it. */
  offset?: number;
  /** The bytes as stored, not decrypted: an object moved elsewhere in the store as it is. */
  raw?: boolean;
  /** This version of the object (`listVersions`), not the current one. */
  versionId?: string;
}

export interface StatOptions {
  /** This version of the object (`listVersions`), not the current one. */
  versionId?: string;
}

/**
 * One version of an object in a store that keeps versions (S3 bucket versioning): what overwrites and deletes left,
 * readable by `versionId` until the version itself is deleted (which Object Lock refuses while it retains it).
 */
export interface ObjectVersion {
  /** Relative to the store prefix, as `list` names objects. */
  name: string;
  versionId: string;
  /** A delete marker: the name reads as gone from here on (until a newer version); it has no bytes. */
  deleteMarker: boolean;
  /** The newest version of its name: what a read without a version id gets, or the marker that hides the rest. */
  latest: boolean;
  size: number;
  lastModified: Date;
}

/** How a provider keeps stored objects from being deleted or replaced (docs/stores.md, "Immutable stores"). */
export interface StoreProtection {
  /** Older versions kept on overwrite and delete: `suspended` keeps those already there, adds none. */
  versioning: 'on' | 'off' | 'suspended' | 'unknown';
  /** S3 Object Lock: on for the bucket, and the retention every new version gets unless told otherwise. */
  objectLock?: { mode?: 'COMPLIANCE' | 'GOVERNANCE'; days?: number; years?: number };
  /** GCS: the bucket retention policy, and whether it is locked (nobody can shorten or remove it then). */
  retentionPolicy?: { seconds: number; locked: boolean };
  /**
   * Nobody holding the programs' credentials can delete or change a stored snapshot before a retention period ends:
   * S3 versioning with Object Lock and a default retention; GCS a bucket retention policy (what
   * `--require-immutable-store` asks for).
   */
  immutable: boolean;
  /** One line for logs and reports: what protects the store, or that nothing does. */
  summary: string;
  /** What could not be read, and the permission that reads it. */
  unknown?: string[];
}

/**
 * A place to keep snapshot objects. Every provider (local, S3, GCS, Azure) implements this and must pass
 * the shared conformance suite. Names are relative to the store's prefix and use `/` as separator.
 *
 * Guarantees every provider keeps:
 * - `put` is atomic: readers see the whole object or nothing; a failed or aborted put leaves nothing. In a store that
 *   keeps versions, a snapshot is never put over another of its name (ObjectExistsError), but for the same bytes again.
 * - `get` streams; it never buffers the whole object.
 * - `list` returns every object under `prefix` (relative to the store prefix), paging as needed.
 */
export interface SnapStore {
  /** A human-readable location for messages, without credentials, e.g. `s3://bucket/prefix`. */
  readonly location: string;
  put(name: string, body: Readable, options?: PutOptions): Promise<void>;
  /** Optional: stores a finished local file, which it consumes (the local store renames it when it can). */
  putFile?(name: string, path: string, options?: PutOptions): Promise<void>;
  /**
   * Optional: a stream that encrypts a snapshot as `put` would (encrypted-store.ts), for a writer that makes a
   * file to store anyway, so that it encrypts on the same pass; undefined when the store does not encrypt. The
   * writer appends the cipher's `nameSeal(name)` once it knows the name.
   */
  sealer?(): ObjectCipher | undefined;
  /**
   * Optional: where an object's stored bytes are (a local store's file, an S3 object), for another store's putCopy;
   * undefined where what `get` returns is not what is stored (encryption).
   */
  copySource?(name: string): CopySource | undefined;
  /**
   * Optional: stores a copy of `source` that the kernel or the store's server makes without the bytes passing through
   * this program, committed only once what landed is proven to have the sha256 `expected.sha256` (an IntegrityError
   * otherwise, and nothing stored). Resolves undefined, having stored nothing, where it cannot make or prove such a
   * copy (another kind of store, another endpoint, no checksum from the server, too large for one copy): the caller
   * then streams. A missing source is an ObjectNotFoundError of the store `options.source`.
   */
  putCopy?(
    name: string,
    source: CopySource,
    expected: { sha256: string; size: number },
    options: PutOptions & { source: string },
  ): Promise<CopyWay | undefined>;
  /** Rejects with ObjectNotFoundError, before any byte is read, when there is no such object. */
  get(name: string, options?: GetOptions): Promise<Readable>;
  list(prefix?: string): Promise<StoredObject[]>;
  /** `undefined` when there is no such object (or no such version). */
  stat(name: string, options?: StatOptions): Promise<StoredObject | undefined>;
  /**
   * Optional: every version the provider keeps of the objects under `prefix`, delete markers included, by name and
   * newest first within a name; `undefined` when the store keeps no versions (S3 versioning never turned on).
   */
  listVersions?(prefix?: string): Promise<ObjectVersion[] | undefined>;
  /** Optional: how the provider protects the store's objects (versioning, Object Lock, retention policies). */
  protection?(): Promise<StoreProtection>;
  /**
   * Deleting a missing object is not an error. An object the provider keeps from deletion (S3 object lock, GCS
   * retention or hold, Azure immutability) rejects with ImmutableObjectError, and stays. In a store that keeps
   * versions, a snapshot's versions go with it: a delete never only hides it behind a delete marker.
   */
  delete(name: string): Promise<void>;
  /** Releases connections; the store is not used afterwards. */
  close?(): Promise<void>;
}

export class ObjectNotFoundError extends OperationError {
  constructor(location: string, name: string, options?: { cause?: unknown }) {
    super(`${location}: there is no object "${name}"`, options);
  }
}

/**
 * A snapshot put over one of the same name in a store that keeps versions: the put would stack a new version on it,
 * which readers would take, rather than replace it. Nothing was written.
 */
export class ObjectExistsError extends OperationError {
  constructor(location: string, name: string, reason: string, options?: { cause?: unknown }) {
    super(
      `${location}: "${name}" is stored already, with other bytes; nothing was written: ${reason}. To replace it, delete it (all its versions) first`,
      options,
    );
  }
}

/** The provider keeps this object from deletion for now (S3 object lock, GCS retention or hold, Azure immutability). */
export class ImmutableObjectError extends OperationError {
  constructor(location: string, name: string, reason: string, options?: { cause?: unknown }) {
    super(`${location}: "${name}" cannot be deleted yet: ${reason}`, options);
  }
}

/**
 * The store answers but refuses writes: a read-only file system (EROFS), no permission (EACCES, EPERM). The sidecar
 * counts such a store as unreachable for writing (`etcd_snapshot_store_reachable` 0), as one that does not answer.
 */
export class StoreNotWritableError extends OperationError {}

/** Whether `err`, or an error it was caused by, is a StoreNotWritableError. */
export function isStoreNotWritable(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause) if (e instanceof StoreNotWritableError) return true;
  return false;
}

/**
 * How a store is protected from deletes and overwrites (docs/stores.md, "Immutable stores"): what its provider says
 * (S3: versioning, Object Lock and its default retention; GCS: versioning, the retention policy), or, for a provider
 * that says nothing, that it is not known to be immutable.
 */
export async function storeProtection(store: SnapStore): Promise<StoreProtection> {
  if (store.protection) return store.protection();
  return {
    versioning: 'unknown',
    immutable: false,
    summary: `protection not reported by this provider (${store.location.split(':')[0]}; S3 and GCS stores report theirs): not known to be immutable`,
  };
}
