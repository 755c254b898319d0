import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  type S3Client,
} from '@aws-sdk/client-s3';
import { parseSnapshotName } from '../../format/snapshot-name.js';
import { checkMetadata } from '../metadata.js';
import { checkObjectName, listingPrefix, nameOfKey, objectKey } from '../object-name.js';
import { type RetryPolicy, retry, statusOf } from '../retry.js';
import {
  byName,
  type CopySource,
  type CopyWay,
  type GetOptions,
  ImmutableObjectError,
  ObjectNotFoundError,
  type ObjectVersion,
  type PutOptions,
  type RequestSender,
  type SnapStore,
  type StatOptions,
  type StoredObject,
  type StoreProtection,
  sendOnce,
} from '../snapstore.js';
import type { StoreLocation } from '../store-url.js';
import { METADATA_SHA256, storedAgain } from '../stored-digest.js';
import { createS3Client } from './client.js';
import { ecsConfig, ocsConfig } from './compatible.js';
import { encryptionParams, type S3Config, s3Config } from './config.js';
import { s3Failure } from './errors.js';
import { uploadObject } from './object-upload.js';
import { PutRequests } from './put-requests.js';
import { S3ServerCopies } from './server-copy.js';
import { abortStaleUploads } from './stale-uploads.js';
import { objectLock, S3Versions } from './versions.js';

/**
 * A bucket (and prefix) on S3 or an S3-compatible server. Uploads stream in `partSize` parts, `partsInFlight` at
 * once, a single PutObject when the body fits in one part (object-upload.ts). An upload that fails or is aborted
 * is aborted on the server too, so it leaves neither an object nor parts.
 */
export class S3Store implements SnapStore {
  readonly location: string;
  private readonly versions: S3Versions;
  private readonly copies: S3ServerCopies;

  constructor(
    private readonly config: S3Config,
    private readonly client: S3Client = createS3Client(config),
  ) {
    this.location = config.location;
    this.versions = new S3Versions(config, client, () => this.customerKey());
    this.copies = new S3ServerCopies(config, client);
  }

  /** Fails with a UsageError saying what to fix when the bucket is missing or the credentials are refused. */
  async check(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.config.bucket }));
    } catch (err) {
      throw s3Failure(this.config, `open bucket "${this.config.bucket}"`, err, true);
    }
  }

  async put(name: string, body: Readable, options: PutOptions = {}): Promise<void> {
    checkObjectName(name);
    checkMetadata(options.metadata);
    const { signal } = options;
    signal?.throwIfAborted();
    const key = this.key(name);
    if (await this.alreadyStored(name, key, body, options)) return;
    const object = { Bucket: this.config.bucket, Key: key, ...this.customerKey() };
    const requests = new PutRequests(this.client, options.send ?? sendOnce, object);
    // Destroying the body wakes a read that waits for data which may never come (a source that hangs).
    const onAbort = () => {
      requests.abort(signal?.reason);
      body.destroy();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const { partSize, partsInFlight } = this.config.transfer;
      const created = { Metadata: options.metadata, ContentType: 'application/octet-stream' };
      await uploadObject(requests, { ...object, ...created, ...encryptionParams(this.config) }, body, {
        partSize,
        partsInFlight,
        partChecksums: this.config.requestChecksum === 'WHEN_SUPPORTED',
        location: this.location,
      });
      await requests.tidy();
    } catch (err) {
      const cause = signal?.aborted ? signal.reason : (requests.failure ?? err);
      body.destroy(); // the upload may still be waiting for data that will never be wanted
      await requests.abandon(cause);
      if (signal?.aborted) throw signal.reason;
      throw s3Failure(this.config, `put "${name}"`, cause);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** This store's object, which another S3 store on the same endpoint can have the server copy (server-copy.ts). */
  copySource(name: string): CopySource | undefined {
    return this.copies.source(this.key(name));
  }

  async putCopy(
    name: string,
    source: CopySource,
    expected: { sha256: string; size: number },
    options: PutOptions & { source: string },
  ): Promise<CopyWay | undefined> {
    checkMetadata(options.metadata);
    options.signal?.throwIfAborted();
    if (!this.copies.canCopy(source, expected.size)) return undefined;
    const key = this.key(name);
    if (await this.alreadyStored(name, key, undefined, options)) return 'server';
    return this.copies.copy(name, key, source, expected, options);
  }

  /**
   * In a bucket that keeps versions, a snapshot put over one of the same name would not replace it but stack a newer
   * version on it, which every reader then takes: refused, unless it is the same snapshot again (its recorded sha256),
   * a retried upload whose first try went through. Other objects (the store lock) are rewritten as usual.
   */
  private async alreadyStored(
    name: string,
    key: string,
    body: Readable | undefined,
    options: PutOptions,
  ): Promise<boolean> {
    if (!parseSnapshotName(name)) return false;
    const send = options.send ?? sendOnce;
    // a status that cannot be read (no s3:GetBucketVersioning) leaves the put as in an unversioned bucket
    const versioned = await send(() => this.versions.versioning(), options.signal).then(
      (status) => status !== undefined,
      () => false,
    );
    if (!versioned) return false;
    const there = await send(
      () =>
        this.client
          .send(new HeadObjectCommand({ Bucket: this.config.bucket, Key: key, ...this.customerKey() }))
          .catch((err: unknown) => {
            if (statusOf(err) === 404) return undefined;
            throw err;
          }),
      options.signal,
    ).catch((err: unknown) => {
      body?.destroy();
      throw s3Failure(this.config, `stat "${name}"`, err);
    });
    if (!there) return false;
    return storedAgain(
      { location: this.location, name },
      there.Metadata ?? {},
      options.metadata?.[METADATA_SHA256],
      body,
      'the bucket keeps versions, so a put would stack a new version over the stored snapshot instead of replacing it (docs/stores.md, "Immutable stores")',
    );
  }

  async get(name: string, options: GetOptions = {}): Promise<Readable> {
    const offset = options.offset ?? 0;
    try {
      const out = await this.client.send(
        new GetObjectCommand({
          Bucket: this.config.bucket,
          Key: this.key(name),
          ...(options.versionId !== undefined && { VersionId: options.versionId }),
          ...(offset > 0 && { Range: `bytes=${offset}-` }),
          ...this.customerKey(),
        }),
      );
      return out.Body as Readable;
    } catch (err) {
      if ((err as Error).name === 'NoSuchKey' || statusOf(err) === 404) {
        throw new ObjectNotFoundError(this.location, name, { cause: err });
      }
      throw s3Failure(this.config, `get "${name}"`, err);
    }
  }

  async list(prefix = ''): Promise<StoredObject[]> {
    const out: StoredObject[] = [];
    let token: string | undefined;
    try {
      do {
        const page = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.config.bucket,
            Prefix: listingPrefix(this.config.prefix, prefix),
            ContinuationToken: token,
          }),
        );
        for (const item of page.Contents ?? []) {
          const name = item.Key && nameOfKey(this.config.prefix, item.Key);
          // S3 listings carry no user metadata; stat() has it.
          if (name)
            out.push({ name, size: item.Size ?? 0, lastModified: item.LastModified ?? new Date(0), metadata: {} });
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    } catch (err) {
      throw s3Failure(this.config, `list "${prefix}"`, err);
    }
    return out.sort(byName);
  }

  async stat(name: string, options: StatOptions = {}): Promise<StoredObject | undefined> {
    try {
      const head = await this.client.send(
        new HeadObjectCommand({
          Bucket: this.config.bucket,
          Key: this.key(name),
          ...(options.versionId !== undefined && { VersionId: options.versionId }),
          ...this.customerKey(),
        }),
      );
      return {
        name,
        size: head.ContentLength ?? 0,
        lastModified: head.LastModified ?? new Date(0),
        metadata: head.Metadata ?? {},
      };
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw s3Failure(this.config, `stat "${name}"`, err);
    }
  }

  /** Undefined when the bucket never had versioning turned on; rejects when its versioning cannot be read. */
  listVersions(prefix = ''): Promise<ObjectVersion[] | undefined> {
    return this.versions.list(prefix);
  }

  protection(): Promise<StoreProtection> {
    return this.versions.protection();
  }

  /**
   * A delete without a version id does not delete in a bucket that keeps versions: it hides the object behind a
   * delete marker while its versions stay, billed (and locked ones cannot go before their retention ends). So in
   * such a bucket the name's versions are deleted by id (versions.ts), a snapshot with a locked one refused as
   * immutable; elsewhere the object's lock is read first (HEAD shows it) and a locked object refused the same way.
   */
  async delete(name: string): Promise<void> {
    try {
      if (await this.versions.keepsVersions()) {
        const refused = await this.versions.delete(name, this.key(name));
        if (refused) throw new ImmutableObjectError(this.location, name, refused.locked);
        return;
      }
      const head = await this.client
        .send(new HeadObjectCommand({ Bucket: this.config.bucket, Key: this.key(name), ...this.customerKey() }))
        .catch((err: unknown) => {
          if (statusOf(err) === 404) return undefined;
          throw err;
        });
      if (!head) return;
      const lock = objectLock(head.ObjectLockRetainUntilDate, head.ObjectLockLegalHoldStatus);
      if (lock) throw new ImmutableObjectError(this.location, name, lock);
      // a version id where the versioning could not be read: the bucket keeps versions, so that one goes, not the key
      const versionId = head.VersionId && head.VersionId !== 'null' ? head.VersionId : undefined;
      await this.client.send(
        new DeleteObjectCommand({ Bucket: this.config.bucket, Key: this.key(name), VersionId: versionId }),
      );
    } catch (err) {
      if (statusOf(err) === 404) return;
      if ((err as Error).name === 'AccessDenied' && /object lock/i.test((err as Error).message)) {
        throw new ImmutableObjectError(this.location, name, 'S3 object lock', { cause: err });
      }
      throw s3Failure(this.config, `delete "${name}"`, err);
    }
  }

  /** Aborts the multipart uploads a killed process left under this store's prefix (stale-uploads.ts). */
  cleanupIncompleteUploads(olderThanMs: number, send: RequestSender = sendOnce): Promise<number> {
    return abortStaleUploads(this.config, this.client, olderThanMs, send);
  }

  async close(): Promise<void> {
    this.client.destroy();
  }

  private key(name: string): string {
    checkObjectName(name);
    return objectKey(this.config.prefix, name);
  }

  private customerKey() {
    const sse = this.config.sseCustomer;
    return sse ? { SSECustomerAlgorithm: sse.algorithm, SSECustomerKey: sse.key } : {};
  }
}

type Configure = (location: StoreLocation, env: NodeJS.ProcessEnv) => Promise<S3Config>;

/** Opens an S3 store configured by `configure`: AWS's sources for s3://, ebr's ECS and OCS ones (compatible.ts). */
function opener(configure: Configure) {
  return async (location: StoreLocation, policy: RetryPolicy, env: NodeJS.ProcessEnv = process.env) => {
    const config = await configure(location, env);
    const store = new S3Store(config, createS3Client(config, env));
    await retry(() => store.check(), policy);
    return store;
  };
}

export const openS3Store = opener(s3Config);
export const openEcsStore = opener(ecsConfig);
export const openOcsStore = opener(ocsConfig);
