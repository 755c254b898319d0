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

/** Runs `request`, perhaps more than once; `signal` ends the waiting between attempts. */
export type RequestSender = <T>(request: () => Promise<T>, signal?: AbortSignal) => Promise<T>;

/** The sender a provider uses when no retry wrapper handed it one: each request once. */
export const sendOnce: RequestSender = (request) => request();

export interface GetOptions {
  /** Start reading at this byte: the retry wrapper resumes an interrupted download with it. */
  offset?: number;
  /** The bytes as stored, not decrypted: an object moved elsewhere in the store as it is. */
  raw?: boolean;
}

/**
 * A place to keep snapshot objects. Every provider (local, S3, GCS, Azure) implements this and must pass
 * the shared conformance suite. Names are relative to the store's prefix and use `/` as separator.
 *
 * Guarantees every provider keeps:
 * - `put` is atomic: readers see the whole object or nothing; a failed or aborted put leaves nothing.
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
  /** Rejects with ObjectNotFoundError, before any byte is read, when there is no such object. */
  get(name: string, options?: GetOptions): Promise<Readable>;
  list(prefix?: string): Promise<StoredObject[]>;
  /** `undefined` when there is no such object. */
  stat(name: string): Promise<StoredObject | undefined>;
  /**
   * Deleting a missing object is not an error. An object the provider keeps from deletion (S3 object lock, GCS
   * retention or hold, Azure immutability) rejects with ImmutableObjectError, and stays.
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
