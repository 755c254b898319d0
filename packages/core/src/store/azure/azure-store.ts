import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { ContainerClient, type StoragePipelineOptions, StorageSharedKeyCredential } from '@azure/storage-blob';
import { type CredentialSource, RotatingCredentials, readCredentials } from '../credential-files.js';
import { checkMetadata } from '../metadata.js';
import { checkObjectName, listingPrefix, nameOfKey, objectKey } from '../object-name.js';
import { sendInParts } from '../parts/part-queue.js';
import { withTimeout } from '../request-timeout.js';
import { type RetryPolicy, retry, statusOf } from '../retry.js';
import {
  byName,
  type GetOptions,
  ImmutableObjectError,
  ObjectNotFoundError,
  type PutOptions,
  type SnapStore,
  type StoredObject,
  sendOnce,
} from '../snapstore.js';
import type { StoreLocation } from '../store-url.js';
import { AZURE_CREDENTIAL_ENV, AZURE_CREDENTIAL_FIELDS, type AzureConfig, azureConfig } from './config.js';
import { azureFailure } from './errors.js';
import { fromAzureMetadata, toAzureMetadata } from './metadata-names.js';

// Each request is made once: retries are RetryingStore's.
const PIPELINE: StoragePipelineOptions = { retryOptions: { maxTries: 1 }, keepAliveOptions: { enable: true } };

/**
 * A container (and prefix) in Azure Blob Storage. A put stages blocks (`partSize` each, `partsInFlight` at
 * once) and commits the block list last: uncommitted blocks are invisible, so an upload that fails or is
 * aborted leaves no object. Azure offers no call to drop uncommitted blocks; it discards them after a week, or
 * when the next commit to the same name lands.
 */
export class AzureStore implements SnapStore {
  readonly location: string;
  private current?: { source?: CredentialSource; client: ContainerClient };
  private readonly rotating?: RotatingCredentials;

  constructor(
    private readonly config: AzureConfig,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.location = config.location;
    if (config.credentials.kind === 'files') {
      this.rotating = new RotatingCredentials(() =>
        readCredentials(AZURE_CREDENTIAL_ENV, AZURE_CREDENTIAL_FIELDS, env),
      );
    }
  }

  async check(): Promise<void> {
    try {
      const container = await this.container();
      await this.timed(undefined, (abortSignal) => container.getProperties({ abortSignal }));
    } catch (err) {
      throw azureFailure(this.config, `open container "${this.config.container}"`, err, true);
    }
  }

  async put(name: string, body: Readable, options: PutOptions = {}): Promise<void> {
    checkObjectName(name);
    checkMetadata(options.metadata);
    const { signal } = options;
    const send = options.send ?? sendOnce;
    try {
      signal?.throwIfAborted();
      const blob = (await this.container()).getBlockBlobClient(this.key(name));
      // Block ids are unique to this upload, so that two uploads of one name never mix their blocks.
      const nonce = randomBytes(6).toString('hex');
      const blockId = (index: number) => Buffer.from(`${nonce}-${String(index).padStart(6, '0')}`).toString('base64');
      const { partSize, partsInFlight } = this.config.transfer;
      const count = await sendInParts(body, { partSize, partsInFlight, signal }, (index, data, partSignal) =>
        send(
          () =>
            this.timed(partSignal, (abortSignal) =>
              blob.stageBlock(blockId(index), data, data.length, { abortSignal }),
            ),
          partSignal,
        ),
      );
      signal?.throwIfAborted();
      // The commit is not cancelled once sent: an abort then could leave the object there while put() fails.
      const blocks = Array.from({ length: count }, (_, i) => blockId(i));
      await send(() =>
        this.timed(undefined, (abortSignal) =>
          blob.commitBlockList(blocks, {
            metadata: toAzureMetadata(options.metadata),
            blobHTTPHeaders: { blobContentType: 'application/octet-stream' },
            abortSignal,
          }),
        ),
      );
    } catch (err) {
      body.destroy();
      if (signal?.aborted) throw signal.reason;
      throw azureFailure(this.config, `put "${name}"`, err);
    }
  }

  async get(name: string, options: GetOptions = {}): Promise<Readable> {
    try {
      const blob = (await this.container()).getBlobClient(this.key(name));
      // maxRetryRequests 0: resuming a broken download is RetryingStore's job.
      const response = await blob.download(options.offset ?? 0, undefined, { maxRetryRequests: 0 });
      return response.readableStreamBody as Readable;
    } catch (err) {
      if (statusOf(err) === 404) throw new ObjectNotFoundError(this.location, name, { cause: err });
      throw azureFailure(this.config, `get "${name}"`, err);
    }
  }

  async list(prefix = ''): Promise<StoredObject[]> {
    const out: StoredObject[] = [];
    try {
      const container = await this.container();
      const pages = container
        .listBlobsFlat({ prefix: listingPrefix(this.config.prefix, prefix), includeMetadata: true })
        .byPage({ maxPageSize: 1000 });
      for await (const page of pages) {
        for (const item of page.segment.blobItems) {
          const name = nameOfKey(this.config.prefix, item.name);
          if (!name) continue;
          out.push({
            name,
            size: item.properties.contentLength ?? 0,
            lastModified: item.properties.lastModified,
            metadata: fromAzureMetadata(item.metadata),
          });
        }
      }
    } catch (err) {
      throw azureFailure(this.config, `list "${prefix}"`, err);
    }
    return out.sort(byName);
  }

  async stat(name: string): Promise<StoredObject | undefined> {
    try {
      const blob = (await this.container()).getBlobClient(this.key(name));
      const properties = await this.timed(undefined, (abortSignal) => blob.getProperties({ abortSignal }));
      return {
        name,
        size: properties.contentLength ?? 0,
        lastModified: properties.lastModified ?? new Date(0),
        metadata: fromAzureMetadata(properties.metadata),
      };
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw azureFailure(this.config, `stat "${name}"`, err);
    }
  }

  async delete(name: string): Promise<void> {
    try {
      const blob = (await this.container()).getBlobClient(this.key(name));
      await this.timed(undefined, (abortSignal) => blob.deleteIfExists({ deleteSnapshots: 'include', abortSignal }));
    } catch (err) {
      const e = err as { code?: string; details?: { errorCode?: string } };
      if ((e?.details?.errorCode ?? e?.code) === 'BlobImmutableDueToPolicy') {
        throw new ImmutableObjectError(this.location, name, 'Azure immutability policy or legal hold', { cause: err });
      }
      throw azureFailure(this.config, `delete "${name}"`, err);
    }
  }

  /** The client for the current credentials: a rotated storageKey file gives a new one, with no restart. */
  private async container(): Promise<ContainerClient> {
    const { credentials, accountUrl, container, account } = this.config;
    if (credentials.kind === 'connection-string') {
      this.current ??= { client: new ContainerClient(credentials.value, container, PIPELINE) };
      return this.current.client;
    }
    const source = await this.rotating?.current();
    if (this.current && this.current.source === source) return this.current.client;
    const key = credentials.kind === 'key' ? credentials.key : source?.values.storageKey;
    const credential = new StorageSharedKeyCredential(account, key ?? '');
    const client = new ContainerClient(`${accountUrl}/${encodeURIComponent(container)}`, credential, PIPELINE);
    this.current = { source, client };
    return client;
  }

  /** A request that takes longer than the configured timeout is given up (and, through the wrapper, retried). */
  private timed<T>(signal: AbortSignal | undefined, request: (signal: AbortSignal) => Promise<T>): Promise<T> {
    return withTimeout(this.config.transfer.timeoutMs, signal, request);
  }

  private key(name: string): string {
    checkObjectName(name);
    return objectKey(this.config.prefix, name);
  }
}

export async function openAzureStore(
  location: StoreLocation,
  policy: RetryPolicy,
  env: NodeJS.ProcessEnv = process.env,
): Promise<AzureStore> {
  const store = new AzureStore(await azureConfig(location, env), env);
  await retry(() => store.check(), policy);
  return store;
}
