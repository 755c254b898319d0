import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import OSS from 'ali-oss';
import { UsageError } from '../../common/errors.js';
import { type CredentialSource, RotatingCredentials, readCredentials } from '../credential-files.js';
import { checkMetadata } from '../metadata.js';
import { checkObjectName, listingPrefix, nameOfKey, objectKey } from '../object-name.js';
import { beforeSending, cutIntoParts, sendInParts, wholeOrParts } from '../parts/part-queue.js';
import { type RetryPolicy, retry, statusOf } from '../retry.js';
import {
  byName,
  type GetOptions,
  ObjectNotFoundError,
  type PutOptions,
  type RequestSender,
  type SnapStore,
  type StoredObject,
  sendOnce,
} from '../snapstore.js';
import type { StoreLocation } from '../store-url.js';
import { ALICLOUD_CREDENTIAL_ENV, ALICLOUD_CREDENTIAL_FIELDS, type OssConfig, ossConfig } from './config.js';
import { normalizeOssError, ossFailure } from './errors.js';

/** OSS's most parts in one upload. */
const MAX_PARTS = 10_000;
/** How far the server's clock may be behind ours when we look whether a complete landed. */
const CLOCK_SKEW_MS = 15 * 60_000;

/** One SDK call; its failures in the shape the retry wrapper judges (errors.ts). */
function call<T>(request: () => Promise<T>): Promise<T> {
  return request().catch((err: unknown) => {
    throw normalizeOssError(err);
  });
}

/**
 * A bucket (and prefix) on Alibaba Cloud OSS through the official `ali-oss` SDK. A body that fits in one part is
 * one PUT; a larger one a multipart upload (`partSize` parts, `partsInFlight` at once) that is completed last, so
 * that the object appears whole or not at all; a failed or aborted one is aborted on the server too. The SDK cannot
 * cancel a request in flight: an abort waits for the parts in flight (each bounded by the timeout).
 */
export class OssStore implements SnapStore {
  readonly location: string;
  private current?: { source?: CredentialSource; client: OSS };
  private readonly rotating?: RotatingCredentials;

  constructor(
    private readonly config: OssConfig,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.location = config.location;
    if (config.credentials) {
      this.rotating = new RotatingCredentials(() =>
        readCredentials(ALICLOUD_CREDENTIAL_ENV, ALICLOUD_CREDENTIAL_FIELDS, env),
      );
    }
  }

  async check(): Promise<void> {
    try {
      const client = await this.client();
      await call(() => client.list({ prefix: listingPrefix(this.config.prefix, ''), 'max-keys': 1 }, {}));
    } catch (err) {
      throw ossFailure(this.config, `open bucket "${this.config.bucket}"`, err, true);
    }
  }

  async put(name: string, body: Readable, options: PutOptions = {}): Promise<void> {
    const key = this.key(name);
    checkMetadata(options.metadata);
    const { signal } = options;
    const send = options.send ?? sendOnce;
    const onAbort = () => body.destroy();
    signal?.addEventListener('abort', onAbort, { once: true });
    let upload: { id: string; startedAt: number; bytes: number; completing: boolean } | undefined;
    try {
      signal?.throwIfAborted();
      const client = await this.client();
      const headers = { 'Content-Type': 'application/octet-stream' };
      const meta = (options.metadata ?? {}) as OSS.UserMeta;
      const cut = await wholeOrParts(cutIntoParts(body, this.config.transfer.partSize));
      if (!cut.parts) {
        const data = cut.whole;
        const md5 = createHash('md5').update(data).digest('base64');
        await send(
          () => call(() => client.put(key, data, { headers: { ...headers, 'Content-MD5': md5 }, meta })),
          signal,
        );
        return;
      }
      const startedAt = Date.now();
      const { uploadId } = await beforeSending(
        cut.parts,
        send(() => call(() => client.initMultipartUpload(key, { headers, meta })), signal),
      );
      upload = { id: uploadId, startedAt, bytes: 0, completing: false };
      const current = upload;
      const done: { number: number; etag: string }[] = [];
      const { partSize, partsInFlight } = this.config.transfer;
      await sendInParts(
        body,
        { partSize, partsInFlight, signal },
        async (index, data, partSignal) => {
          if (index >= MAX_PARTS) {
            throw new UsageError(`${this.location}: "${name}" needs more than ${MAX_PARTS} parts: raise ?partSize=`);
          }
          current.bytes += data.length;
          const part = await send(
            () => call(() => client.uploadPart(key, current.id, index + 1, data, 0, data.length)),
            partSignal,
          );
          done[index] = { number: index + 1, etag: part.etag };
        },
        cut.parts,
      );
      signal?.throwIfAborted();
      current.completing = true;
      // Not cancelled once sent: an abort then could leave the object there while put() fails.
      await send(() => call(() => client.completeMultipartUpload(key, current.id, done)));
    } catch (err) {
      body.destroy();
      if (upload) {
        // A complete whose answer was lost may have landed: then the put succeeded.
        if (upload.completing && (await this.landed(key, upload))) return;
        await this.abandon(key, upload.id, send);
      }
      if (signal?.aborted) throw signal.reason;
      throw ossFailure(this.config, `put "${name}"`, err);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Whether a complete whose answer never came did land: the object has this put's size and is new enough. */
  private async landed(key: string, upload: { startedAt: number; bytes: number }): Promise<boolean> {
    try {
      const client = await this.client();
      const head = await call(() => client.head(key));
      const headers = (head.res as { headers?: Record<string, string> }).headers ?? {};
      return (
        Number(headers['content-length']) === upload.bytes &&
        Date.parse(headers['last-modified'] ?? '') >= upload.startedAt - CLOCK_SKEW_MS
      );
    } catch {
      return false;
    }
  }

  private async abandon(key: string, uploadId: string, send: RequestSender): Promise<void> {
    try {
      const client = await this.client();
      await send(() => call(() => client.abortMultipartUpload(key, uploadId)));
    } catch {
      // Best effort: a bucket lifecycle rule (AbortMultipartUpload) removes what is left.
    }
  }

  async get(name: string, options: GetOptions = {}): Promise<Readable> {
    const key = this.key(name);
    const offset = options.offset ?? 0;
    try {
      const client = await this.client();
      const result = await call(() =>
        client.getStream(key, { headers: offset > 0 ? { Range: `bytes=${offset}-` } : {} }),
      );
      return result.stream as Readable;
    } catch (err) {
      if ((err as { code?: string }).code === 'NoSuchKey' || statusOf(err) === 404) {
        throw new ObjectNotFoundError(this.location, name, { cause: err });
      }
      throw ossFailure(this.config, `get "${name}"`, err);
    }
  }

  async list(prefix = ''): Promise<StoredObject[]> {
    const out: StoredObject[] = [];
    try {
      const client = await this.client();
      let marker: string | undefined;
      do {
        const page = await call(() =>
          client.list({ prefix: listingPrefix(this.config.prefix, prefix), marker, 'max-keys': 1000 }, {}),
        );
        for (const item of page.objects ?? []) {
          const objectName = nameOfKey(this.config.prefix, item.name);
          // OSS listings carry no user metadata; stat() has it.
          if (objectName) {
            out.push({ name: objectName, size: item.size, lastModified: new Date(item.lastModified), metadata: {} });
          }
        }
        marker = page.isTruncated ? page.nextMarker : undefined;
      } while (marker);
    } catch (err) {
      throw ossFailure(this.config, `list "${prefix}"`, err);
    }
    return out.sort(byName);
  }

  async stat(name: string): Promise<StoredObject | undefined> {
    const key = this.key(name);
    try {
      const client = await this.client();
      const head = await call(() => client.head(key));
      const headers = (head.res as { headers?: Record<string, string> }).headers ?? {};
      const metadata = Object.fromEntries(Object.entries(head.meta ?? {}).map(([k, v]) => [k, String(v)]));
      return {
        name,
        size: Number(headers['content-length'] ?? 0),
        lastModified: new Date(headers['last-modified'] ?? 0),
        metadata,
      };
    } catch (err) {
      if (statusOf(err) === 404 || (err as { code?: string }).code === 'NoSuchKey') return undefined;
      throw ossFailure(this.config, `stat "${name}"`, err);
    }
  }

  async delete(name: string): Promise<void> {
    const key = this.key(name);
    try {
      const client = await this.client();
      await call(() => client.delete(key));
    } catch (err) {
      if (statusOf(err) === 404) return;
      throw ossFailure(this.config, `delete "${name}"`, err);
    }
  }

  /** The client for the current credentials: rotated credential files give a new one, with no restart. */
  private async client(): Promise<OSS> {
    const source = await this.rotating?.current();
    if (this.current && this.current.source === source) return this.current.client;
    const keys = source
      ? { accessKeyId: source.values.accessKeyID ?? '', accessKeySecret: source.values.accessKeySecret ?? '' }
      : this.config.keys;
    const client = new OSS({
      ...keys,
      bucket: this.config.bucket,
      endpoint: this.config.endpoint,
      secure: this.config.endpoint.startsWith('https:'),
      timeout: this.config.transfer.timeoutMs,
    });
    this.current = { source, client };
    return client;
  }

  private key(name: string): string {
    checkObjectName(name);
    return objectKey(this.config.prefix, name);
  }
}

export async function openOssStore(
  location: StoreLocation,
  policy: RetryPolicy,
  env: NodeJS.ProcessEnv = process.env,
): Promise<OssStore> {
  const store = new OssStore(await ossConfig(location, env), env);
  await retry(() => store.check(), policy);
  return store;
}
