import { Readable } from 'node:stream';
import { type BucketMetadata, type File, Storage } from '@google-cloud/storage';
import { errorMessage, IntegrityError, OperationError, StewardError, UsageError } from '../../common/errors.js';
import { parseSnapshotName } from '../../format/snapshot-name.js';
import { filesVersion } from '../credential-files.js';
import { checkMetadata } from '../metadata.js';
import { checkObjectName, listingPrefix, nameOfKey, objectKey } from '../object-name.js';
import { withTimeout } from '../request-timeout.js';
import { type RetryPolicy, retry, statusOf } from '../retry.js';
import {
  byName,
  type GetOptions,
  ImmutableObjectError,
  ObjectExistsError,
  ObjectNotFoundError,
  type ObjectVersion,
  type PutOptions,
  type SnapStore,
  type StatOptions,
  type StoredObject,
  type StoreProtection,
  sendOnce,
} from '../snapstore.js';
import type { StoreLocation } from '../store-url.js';
import { METADATA_SHA256, storedAgain } from '../stored-digest.js';
import { type GcsConfig, GOOGLE_CREDENTIALS_ENV, gcsConfig } from './config.js';
import { checkDefaultCredentials } from './default-credentials.js';
import { GcsGenerations } from './generations.js';
import { startSession, uploadResumable } from './resumable-upload.js';

const GOOGLE_ENDPOINT = 'https://storage.googleapis.com';

interface Clients {
  version: string;
  /** Makes each request once: retries are RetryingStore's. */
  storage: Storage;
}

/**
 * A bucket (and prefix) on Google Cloud Storage. A put is a resumable upload in `partSize` chunks (see
 * resumable-upload.ts): the object appears only when the last chunk is in, and an upload that fails or is
 * aborted is cancelled on the server.
 */
export class GcsStore implements SnapStore {
  readonly location: string;
  private clients?: Promise<Clients>;
  private readonly generations: GcsGenerations;

  constructor(private readonly config: GcsConfig) {
    this.location = config.location;
    this.generations = new GcsGenerations(config.prefix, async () =>
      (await this.current()).storage.bucket(config.bucket),
    );
  }

  async check(): Promise<void> {
    try {
      const { storage } = await this.current();
      if (this.config.authenticate && !this.config.keyFile) await checkDefaultCredentials(storage, this.location);
      await storage.bucket(this.config.bucket).getMetadata();
    } catch (err) {
      throw this.failure(`open bucket "${this.config.bucket}"`, err, true);
    }
  }

  async put(name: string, body: Readable, options: PutOptions = {}): Promise<void> {
    checkObjectName(name);
    checkMetadata(options.metadata);
    const { signal } = options;
    const send = options.send ?? sendOnce;
    let session: string | undefined;
    try {
      signal?.throwIfAborted();
      if (await this.alreadyStored(name, body, options)) return;
      const { storage } = await this.current();
      const { bucket, endpoint, authenticate } = this.config;
      const { partSize, timeoutMs } = this.config.transfer;
      const url =
        `${endpoint ?? GOOGLE_ENDPOINT}/upload/storage/v1/b/${encodeURIComponent(bucket)}/o` +
        `?uploadType=resumable&name=${encodeURIComponent(this.key(name))}`;
      const resource = { contentType: 'application/octet-stream', metadata: options.metadata ?? {} };
      const auth = authenticate ? await storage.authClient.getRequestHeaders(url) : undefined;
      session = await send(() => startSession(url, resource, auth, { timeoutMs, signal }), signal);
      await uploadResumable(session, body, { chunkSize: partSize, timeoutMs, signal, send });
    } catch (err) {
      body.destroy();
      if (session) await cancelSession(session);
      if (err instanceof ObjectExistsError) throw err;
      if (err instanceof IntegrityError) await this.delete(name).catch(() => {});
      if (signal?.aborted) throw signal.reason;
      throw this.failure(`put "${name}"`, err);
    }
  }

  /** A plain media GET: the client library's download path adds nothing we want (retries are the wrapper's). */
  async get(name: string, options: GetOptions = {}): Promise<Readable> {
    const offset = options.offset ?? 0;
    const { storage } = await this.current();
    const generation = options.versionId === undefined ? '' : `&generation=${encodeURIComponent(options.versionId)}`;
    const url = `${this.config.endpoint ?? GOOGLE_ENDPOINT}/storage/v1/b/${encodeURIComponent(this.config.bucket)}/o/${encodeURIComponent(this.key(name))}?alt=media${generation}`;
    const headers = new Headers(this.config.authenticate ? await storage.authClient.getRequestHeaders(url) : undefined);
    if (offset > 0) headers.set('range', `bytes=${offset}-`);
    // The timeout covers the wait for the answer only (its timer is gone once fetch resolves); the body may
    // take as long as it takes.
    let response: Response;
    try {
      response = await withTimeout(this.config.transfer.timeoutMs, undefined, (signal) =>
        fetch(url, { headers, signal }),
      );
    } catch (err) {
      throw this.failure(`get "${name}"`, err);
    }
    if (response.status === 404) throw new ObjectNotFoundError(this.location, name);
    if (!response.ok || !response.body) {
      const text = await response.text().catch(() => '');
      const err = Object.assign(new Error(text.slice(0, 300) || response.statusText), { status: response.status });
      throw this.failure(`get "${name}"`, err);
    }
    return Readable.fromWeb(response.body as import('node:stream/web').ReadableStream);
  }

  async list(prefix = ''): Promise<StoredObject[]> {
    const out: StoredObject[] = [];
    try {
      const { storage } = await this.current();
      const bucket = storage.bucket(this.config.bucket);
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
    return out.sort(byName);
  }

  async stat(name: string, options: StatOptions = {}): Promise<StoredObject | undefined> {
    try {
      const { storage } = await this.current();
      const [metadata] = await this.file(storage, name, options.versionId).getMetadata();
      return toStoredObject(name, metadata);
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw this.failure(`stat "${name}"`, err);
    }
  }

  /** Undefined where the bucket keeps no generations but the live ones; rejects when they cannot be listed. */
  async listVersions(prefix = ''): Promise<ObjectVersion[] | undefined> {
    try {
      return await this.generations.list(prefix);
    } catch (err) {
      throw this.failure(`list the generations under "${prefix}" (grant storage.objects.list)`, err);
    }
  }

  /**
   * In a bucket with versioning on, a snapshot put over one of the same name would not replace it but make it
   * noncurrent under a newer generation, which every reader then takes: refused, unless it is the same snapshot again
   * (its recorded sha256), a retried upload whose first try went through. Other objects are rewritten as usual.
   */
  private async alreadyStored(name: string, body: Readable, options: PutOptions): Promise<boolean> {
    if (!parseSnapshotName(name)) return false;
    const send = options.send ?? sendOnce;
    // versioning that cannot be read (no storage.buckets.get) leaves the put as in a bucket without it
    if (!(await send(() => this.generations.versioning(), options.signal).catch(() => false))) return false;
    const there = await send(() => this.stat(name), options.signal);
    if (!there) return false;
    return storedAgain(
      { location: this.location, name },
      there.metadata,
      options.metadata?.[METADATA_SHA256],
      body,
      'the bucket keeps noncurrent generations, so a put would make the stored snapshot noncurrent under a new one instead of replacing it (docs/stores.md, "Immutable stores")',
    );
  }

  /**
   * A bucket retention policy keeps every object from deletion and overwrite until its period has passed (GCS refuses
   * both outright, so nothing is hidden: an attack fails); locked, nobody can shorten or remove it. Object versioning
   * keeps what an overwrite or a delete left as noncurrent generations, which these programs read back.
   */
  async protection(): Promise<StoreProtection> {
    let metadata: BucketMetadata;
    try {
      const { storage } = await this.current();
      [metadata] = await storage.bucket(this.config.bucket).getMetadata();
    } catch (err) {
      const reason = errorMessage(this.failure('read the bucket (grant storage.buckets.get)', err));
      return { versioning: 'unknown', immutable: false, summary: 'protection unknown', unknown: [reason] };
    }
    const versioning = metadata.versioning?.enabled ? 'on' : 'off';
    const seconds = Number(metadata.retentionPolicy?.retentionPeriod ?? 0);
    const locked = metadata.retentionPolicy?.isLocked === true;
    const retention =
      seconds > 0
        ? `retention policy ${+(seconds / 86_400).toFixed(2)} day(s)${locked ? ', locked' : ', not locked (a bucket owner can remove it)'}`
        : 'no retention policy';
    const immutable = seconds > 0;
    return {
      versioning,
      ...(seconds > 0 ? { retentionPolicy: { seconds, locked } } : {}),
      immutable,
      summary: `versioning ${versioning}, ${retention}: ${immutable ? 'immutable: GCS refuses to delete or overwrite a snapshot before its retention ends' : versioning === 'on' ? 'not immutable: a snapshot deleted or overwritten stays as a noncurrent generation, which these programs read back, until anyone allowed to delete generations removes it' : 'not immutable: a snapshot deleted or overwritten is lost to these programs'}`,
    };
  }

  async delete(name: string): Promise<void> {
    try {
      // in a bucket with versioning on, a plain delete would only hide a snapshot: its generations go, by number
      if (await this.generations.versioning().catch(() => false))
        return await this.generations.delete(name, this.key(name));
      const { storage } = await this.current();
      await this.file(storage, name).delete({ ignoreNotFound: true });
    } catch (err) {
      // GCS answers 403 for an object a retention policy or a hold keeps, with a reason (or message) that says so.
      if (
        statusOf(err) === 403 &&
        /retentionPolicyNotMet|objectUnderActiveHold|retention policy|active hold/i.test(describe(err))
      ) {
        throw new ImmutableObjectError(this.location, name, 'GCS retention or hold', { cause: err });
      }
      throw this.failure(`delete "${name}"`, err);
    }
  }

  /** The clients for the current key file: a rotated file gives new ones, with no restart. */
  private async current(): Promise<Clients> {
    const files = this.config.keyFile ? [this.config.keyFile] : [];
    const version = await filesVersion(files);
    const cached = this.clients && (await this.clients);
    if (cached && cached.version === version) return cached;
    const clients: Clients = {
      version,
      storage: new Storage({
        apiEndpoint: this.config.endpoint,
        useAuthWithCustomEndpoint: this.config.authenticate,
        keyFilename: this.config.authenticate ? this.config.keyFile : undefined,
        timeout: this.config.transfer.timeoutMs,
        retryOptions: { autoRetry: false },
      }),
    };
    this.clients = Promise.resolve(clients);
    return clients;
  }

  private file(storage: Storage, name: string, generation?: string): File {
    return storage
      .bucket(this.config.bucket)
      .file(this.key(name), generation === undefined ? {} : { generation: Number(generation) });
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
    if (status === 404 && opening)
      message = `${where}: bucket "${this.config.bucket}" does not exist: create it, or fix --store`;
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

export async function openGcsStore(
  location: StoreLocation,
  policy: RetryPolicy,
  env: NodeJS.ProcessEnv = process.env,
): Promise<GcsStore> {
  const store = new GcsStore(await gcsConfig(location, env));
  await retry(() => store.check(), policy);
  return store;
}
