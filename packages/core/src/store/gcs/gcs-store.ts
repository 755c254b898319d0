import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type File, Storage, type StorageOptions } from '@google-cloud/storage';
import { errorMessage, OperationError, StewardError, UsageError } from '../../errors.js';
import { filesVersion } from '../credential-files.js';
import type { StoreLocation } from '../location.js';
import { checkMetadata } from '../metadata.js';
import { checkObjectName, listingPrefix, nameOfKey, objectKey } from '../object-name.js';
import { type RetryPolicy, retry, statusOf } from '../retry.js';
import { type GetOptions, ObjectNotFoundError, type PutOptions, type SnapStore, type StoredObject } from '../snapstore.js';
import { GOOGLE_CREDENTIALS_ENV, type GcsConfig, gcsConfig } from './config.js';

interface Clients {
  version: string;
  /** Makes each request once: retries are RetryingStore's. */
  requests: Storage;
  /**
   * For uploads. A resumable upload recovers from a failed chunk by asking the server how much it has and
   * going on from there; the client library does that itself, inside its write stream, where no wrapper can
   * reach. So this client retries, with the numbers of the store's retry policy.
   */
  uploads: Storage;
}

/**
 * A bucket (and prefix) on Google Cloud Storage. A put is a resumable upload in `partSize` chunks: the object
 * appears only when the last chunk is in, and an upload that fails or is aborted is cancelled on the server.
 */
export class GcsStore implements SnapStore {
  readonly location: string;
  private clients?: Promise<Clients>;

  constructor(
    private readonly config: GcsConfig,
    private readonly policy: RetryPolicy,
  ) {
    this.location = config.location;
  }

  async check(): Promise<void> {
    try {
      const { requests } = await this.current();
      await requests.bucket(this.config.bucket).getMetadata();
    } catch (err) {
      throw this.failure(`open bucket "${this.config.bucket}"`, err, true);
    }
  }

  async put(name: string, body: Readable, options: PutOptions = {}): Promise<void> {
    checkObjectName(name);
    checkMetadata(options.metadata);
    const { signal } = options;
    signal?.throwIfAborted();
    const { uploads } = await this.current();
    const file = uploads.bucket(this.config.bucket).file(this.key(name));
    const metadata = { contentType: 'application/octet-stream', metadata: options.metadata ?? {} };
    let session: string | undefined;
    try {
      // The session is opened first, so that its URI is known, whenever the upload fails, to cancel it.
      [session] = await file.createResumableUpload({ metadata });
      const upload = file.createWriteStream({
        uri: session,
        resumable: true,
        chunkSize: this.config.transfer.partSize,
        timeout: this.config.transfer.timeoutMs,
        validation: 'crc32c',
        metadata,
      });
      await pipeline(body, upload, { signal });
    } catch (err) {
      body.destroy();
      if (session) await cancelSession(session);
      if (signal?.aborted) throw signal.reason;
      throw this.failure(`put "${name}"`, err);
    }
  }

  /** A stream that starts its request on the first read; RetryingStore's stat reports a missing object first. */
  async get(name: string, options: GetOptions = {}): Promise<Readable> {
    const { requests } = await this.current();
    const offset = options.offset ?? 0;
    const stream = this.file(requests, name).createReadStream({
      decompress: false,
      validation: offset > 0 ? false : 'crc32c',
      ...(offset > 0 && { start: offset }),
    });
    return stream;
  }

  async list(prefix = ''): Promise<StoredObject[]> {
    const out: StoredObject[] = [];
    try {
      const { requests } = await this.current();
      const bucket = requests.bucket(this.config.bucket);
      let pageToken: string | undefined;
      do {
        const [files, next] = await bucket.getFiles({
          prefix: listingPrefix(this.config.prefix, prefix),
          autoPaginate: false,
          maxResults: 1000,
          pageToken,
        });
        for (const file of files) {
          const name = nameOfKey(this.config.prefix, file.name);
          if (name) out.push(toStoredObject(name, file.metadata));
        }
        pageToken = (next as { pageToken?: string } | null)?.pageToken;
      } while (pageToken);
    } catch (err) {
      throw this.failure(`list "${prefix}"`, err);
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async stat(name: string): Promise<StoredObject | undefined> {
    try {
      const { requests } = await this.current();
      const [metadata] = await this.file(requests, name).getMetadata();
      return toStoredObject(name, metadata);
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw this.failure(`stat "${name}"`, err);
    }
  }

  async delete(name: string): Promise<void> {
    try {
      const { requests } = await this.current();
      await this.file(requests, name).delete({ ignoreNotFound: true });
    } catch (err) {
      throw this.failure(`delete "${name}"`, err);
    }
  }

  /** The clients for the current key file: a rotated file gives new ones, with no restart. */
  private async current(): Promise<Clients> {
    const files = this.config.keyFile ? [this.config.keyFile] : [];
    const version = await filesVersion(files);
    const cached = this.clients && (await this.clients);
    if (cached && cached.version === version) return cached;
    const base: StorageOptions = {
      apiEndpoint: this.config.endpoint,
      useAuthWithCustomEndpoint: this.config.authenticate,
      keyFilename: this.config.authenticate ? this.config.keyFile : undefined,
      timeout: this.config.transfer.timeoutMs,
    };
    const { attempts, maxDelayMs } = this.policy;
    const clients: Clients = {
      version,
      requests: new Storage({ ...base, retryOptions: { autoRetry: false, maxRetries: 0 } }),
      uploads: new Storage({
        ...base,
        retryOptions: { autoRetry: true, maxRetries: attempts - 1, maxRetryDelay: Math.max(1, maxDelayMs / 1000) },
      }),
    };
    this.clients = Promise.resolve(clients);
    return clients;
  }

  private file(storage: Storage, name: string): File {
    return storage.bucket(this.config.bucket).file(this.key(name));
  }

  private key(name: string): string {
    checkObjectName(name);
    return objectKey(this.config.prefix, name);
  }

  /** A message naming the store, the operation and the fix; UsageError for configuration mistakes at open. */
  private failure(what: string, err: unknown, opening = false): Error {
    if (err instanceof StewardError) return err;
    const status = statusOf(err);
    const code = (err as { code?: unknown }).code;
    const where = `${this.location}: ${what}`;
    let message: string | undefined;
    if (status === 404 && opening) message = `${where}: bucket "${this.config.bucket}" does not exist: create it, or fix --store`;
    else if (status === 401 || status === 403) {
      message = `${where}: the credentials were refused (${status}): check ${GOOGLE_CREDENTIALS_ENV} and that its account may use bucket "${this.config.bucket}"`;
    } else if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
      message = `${where}: cannot reach ${this.config.endpoint ?? 'storage.googleapis.com'} (${code}): check the endpoint option and that the server is up`;
    } else if (/Could not load the default credentials/i.test(errorMessage(err))) {
      message = `${where}: no Google credentials found: set ${GOOGLE_CREDENTIALS_ENV} to a service account JSON file`;
    }
    if (message) return opening ? new UsageError(message, { cause: err }) : new OperationError(message, { cause: err });
    return new OperationError(`${where} failed: ${describe(err)}${status ? ` (HTTP ${status})` : ''}`, { cause: err });
  }
}

/** The resumable upload fails with the server's error object itself, not an Error. */
function describe(err: unknown): string {
  if (err instanceof Error) return err.message;
  const e = err as { message?: unknown; errors?: { message?: unknown }[] };
  return String(e?.message ?? e?.errors?.[0]?.message ?? errorMessage(err));
}

function toStoredObject(name: string, metadata: File['metadata']): StoredObject {
  const custom = (metadata.metadata ?? {}) as Record<string, unknown>;
  return {
    name,
    size: Number(metadata.size ?? 0),
    lastModified: new Date(metadata.updated ?? metadata.timeCreated ?? 0),
    metadata: Object.fromEntries(Object.entries(custom).map(([k, v]) => [k, String(v)])),
  };
}

/**
 * Cancels a resumable upload, so that nothing of it stays on the server. The session URI is itself the
 * authorization (GCS's design), so a plain request does it. Best effort: sessions also expire after a week.
 */
async function cancelSession(uri: string): Promise<void> {
  try {
    await fetch(uri, { method: 'DELETE', signal: AbortSignal.timeout(10_000) });
  } catch {
    // nothing more to do
  }
}

export async function openGcsStore(location: StoreLocation, policy: RetryPolicy): Promise<GcsStore> {
  const store = new GcsStore(await gcsConfig(location), policy);
  await retry(() => store.check(), policy);
  return store;
}
