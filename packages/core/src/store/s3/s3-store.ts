import type { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  type S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { collectGarbage } from '../../common/memory-bound.js';
import { checkMetadata } from '../metadata.js';
import { checkObjectName, listingPrefix, nameOfKey, objectKey } from '../object-name.js';
import { type RetryPolicy, retry, statusOf } from '../retry.js';
import {
  byName,
  type GetOptions,
  ImmutableObjectError,
  ObjectNotFoundError,
  type PutOptions,
  type RequestSender,
  type SnapStore,
  type StoredObject,
  sendOnce,
} from '../snapstore.js';
import type { StoreLocation } from '../store-url.js';
import { createS3Client } from './client.js';
import { ecsConfig, ocsConfig } from './compatible.js';
import { type S3Config, s3Config } from './config.js';
import { s3Failure } from './errors.js';
import { PutRequests } from './put-requests.js';

/**
 * A bucket (and prefix) on S3 or an S3-compatible server. Uploads stream through lib-storage's Upload:
 * `partSize` parts, `partsInFlight` at once, a single PutObject when the body fits in one part. An upload that
 * fails or is aborted is aborted on the server too, so it leaves neither an object nor parts.
 */
export class S3Store implements SnapStore {
  readonly location: string;

  constructor(
    private readonly config: S3Config,
    private readonly client: S3Client = createS3Client(config),
  ) {
    this.location = config.location;
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
    const requests = new PutRequests(this.client, options.send ?? sendOnce, {
      Bucket: this.config.bucket,
      Key: key,
      ...this.customerKey(),
    });
    const upload = new Upload({
      client: requests.clientView(),
      abortController: requests.abortController,
      partSize: this.config.transfer.partSize,
      queueSize: this.config.transfer.partsInFlight,
      params: {
        Bucket: this.config.bucket,
        Key: key,
        Body: body,
        Metadata: options.metadata,
        ContentType: 'application/octet-stream',
        ...this.customerKey(),
        ...(this.config.sse && { ServerSideEncryption: this.config.sse.type }),
        ...(this.config.sse?.type === 'aws:kms' && { SSEKMSKeyId: this.config.sse.kmsKeyId }),
      },
    });
    upload.on('httpUploadProgress', () => collectGarbage('major')); // a part sent is garbage now: memory-bound.ts
    const onAbort = () => requests.abortController.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await upload.done();
      await requests.tidy();
    } catch (err) {
      const cause = signal?.aborted ? signal.reason : (requests.failure ?? err);
      body.destroy(); // Upload may still be waiting for data that will never be wanted
      await requests.abandon(cause);
      if (signal?.aborted) throw signal.reason;
      throw s3Failure(this.config, `put "${name}"`, cause);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async get(name: string, options: GetOptions = {}): Promise<Readable> {
    const offset = options.offset ?? 0;
    try {
      const out = await this.client.send(
        new GetObjectCommand({
          Bucket: this.config.bucket,
          Key: this.key(name),
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

  async stat(name: string): Promise<StoredObject | undefined> {
    try {
      const head = await this.client.send(
        new HeadObjectCommand({ Bucket: this.config.bucket, Key: this.key(name), ...this.customerKey() }),
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

  /**
   * In a bucket with object lock, a delete without a version id succeeds by hiding the object behind a delete
   * marker while the locked version stays: the object would look deleted and still be billed. So the object's
   * lock is read first (HEAD shows it), and a locked object is refused as immutable rather than hidden.
   */
  async delete(name: string): Promise<void> {
    try {
      const head = await this.client
        .send(new HeadObjectCommand({ Bucket: this.config.bucket, Key: this.key(name), ...this.customerKey() }))
        .catch((err: unknown) => {
          if (statusOf(err) === 404) return undefined;
          throw err;
        });
      if (!head) return;
      const lock = objectLock(head.ObjectLockRetainUntilDate, head.ObjectLockLegalHoldStatus);
      if (lock) throw new ImmutableObjectError(this.location, name, lock);
      await this.client.send(new DeleteObjectCommand({ Bucket: this.config.bucket, Key: this.key(name) }));
    } catch (err) {
      if (statusOf(err) === 404) return;
      if ((err as Error).name === 'AccessDenied' && /object lock/i.test((err as Error).message)) {
        throw new ImmutableObjectError(this.location, name, 'S3 object lock', { cause: err });
      }
      throw s3Failure(this.config, `delete "${name}"`, err);
    }
  }

  /**
   * Aborts multipart uploads under this store's prefix begun more than `olderThanMs` ago: what a process killed
   * mid-upload (SIGKILL, OOM) leaves behind. They are invisible to list and get, but their parts are billed.
   * Resolves with the number aborted. A bucket lifecycle rule (AbortIncompleteMultipartUpload) does the same
   * server-side; this is for servers without one.
   */
  async cleanupIncompleteUploads(olderThanMs: number, send: RequestSender = sendOnce): Promise<number> {
    const before = Date.now() - olderThanMs;
    const prefix = listingPrefix(this.config.prefix, '');
    let aborted = 0;
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    try {
      do {
        const page = await send(() =>
          this.client.send(
            new ListMultipartUploadsCommand({
              Bucket: this.config.bucket,
              Prefix: prefix,
              KeyMarker: keyMarker,
              UploadIdMarker: uploadIdMarker,
            }),
          ),
        );
        for (const upload of page.Uploads ?? []) {
          if (!upload.Key || !upload.UploadId || (upload.Initiated?.getTime() ?? 0) > before) continue;
          try {
            await send(() =>
              this.client.send(
                new AbortMultipartUploadCommand({
                  Bucket: this.config.bucket,
                  Key: upload.Key,
                  UploadId: upload.UploadId,
                }),
              ),
            );
            aborted++;
          } catch (err) {
            if ((err as Error).name !== 'NoSuchUpload') throw err;
          }
        }
        keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
        uploadIdMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
      } while (keyMarker);
    } catch (err) {
      throw s3Failure(this.config, 'clean up incomplete uploads', err);
    }
    return aborted;
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

/** Why S3 object lock keeps an object now, or undefined when it does not. */
function objectLock(retainUntil: Date | undefined, legalHold: string | undefined): string | undefined {
  if (legalHold === 'ON') return 'S3 object lock: legal hold';
  if (retainUntil && retainUntil.getTime() > Date.now()) {
    return `S3 object lock: retained until ${retainUntil.toISOString()}`;
  }
  return undefined;
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
