import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { checkMetadata } from '../metadata.js';
import { checkObjectName, listingPrefix, nameOfKey, objectKey } from '../object-name.js';
import { cutIntoParts, wholeOrParts } from '../parts/part-queue.js';
import { type RetryPolicy, retry } from '../retry.js';
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
import { drain, SwiftClient } from './client.js';
import { type SwiftConfig, swiftConfig } from './config.js';
import { SwiftHttpError, swiftFailure } from './errors.js';
import { deleteAll, isSegment, putLargeObject, segmentsOf } from './large-object.js';

const META = 'x-object-meta-';
/** Swift's largest page of a container listing. */
const PAGE = 10_000;

interface Listed {
  name: string;
  bytes: number;
  last_modified: string;
  content_type?: string;
}

/**
 * A container (and prefix) in OpenStack Swift. A body that fits in one part is one PUT; a larger one becomes a
 * static large object (large-object.ts): segments, then the manifest, so that the object appears whole or not at
 * all. Segments are hidden from listings, and deleted with their object.
 */
export class SwiftStore implements SnapStore {
  readonly location: string;
  private readonly client: SwiftClient;

  constructor(
    private readonly config: SwiftConfig,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.location = config.location;
    this.client = new SwiftClient(config, env);
  }

  /** Fails with a UsageError saying what to fix when the login is refused or the container is missing. */
  async check(): Promise<void> {
    try {
      await this.client.expectOk('HEAD', undefined);
    } catch (err) {
      throw swiftFailure(this.config, `open container "${this.config.container}"`, err, true);
    }
  }

  async put(name: string, body: Readable, options: PutOptions = {}): Promise<void> {
    const key = this.key(name);
    checkMetadata(options.metadata);
    const { signal } = options;
    const send = options.send ?? sendOnce;
    const headers = Object.fromEntries(Object.entries(options.metadata ?? {}).map(([k, v]) => [`${META}${k}`, v]));
    // A body that stalls must not hold the put after an abort: destroying it wakes the read.
    const onAbort = () => body.destroy();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      signal?.throwIfAborted();
      const cut = await wholeOrParts(cutIntoParts(body, this.config.transfer.partSize));
      if (!cut.parts) {
        const replaced = await send(() => this.putWhole(key, cut.whole, headers, signal), signal);
        // Only an object that was there can have left segments behind.
        if (replaced) await this.deleteSegments(key, send).catch(() => undefined);
      } else {
        const stamp = await putLargeObject(this.client, this.config, key, body, cut.parts, headers, send, signal);
        // The segments of an object this put replaced: no manifest names them any more.
        await this.deleteSegments(key, send, stamp).catch(() => undefined);
      }
    } catch (err) {
      body.destroy();
      if (signal?.aborted) throw signal.reason;
      throw swiftFailure(this.config, `put "${name}"`, err);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * One PUT of a whole object, with its MD5 for Swift to check. Tried first as a new object (If-None-Match), so
   * that a put of a new name (every snapshot's) needs no look for segments of an object it replaced. Resolves
   * with whether an object was there.
   */
  private async putWhole(
    key: string,
    data: Buffer,
    meta: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<boolean> {
    const headers = {
      ...meta,
      etag: createHash('md5').update(data).digest('hex'),
      'content-type': 'application/octet-stream',
    };
    const response = await this.client.request('PUT', key, {
      body: data,
      headers: { ...headers, 'if-none-match': '*' },
      signal,
    });
    const text = await response.text();
    if (response.ok) return false;
    if (response.status !== 412)
      throw new SwiftHttpError(response.status, `PUT ${key}: ${response.status} ${text.slice(0, 300)}`);
    await this.client.expectOk('PUT', key, { body: data, headers, signal });
    return true;
  }

  async get(name: string, options: GetOptions = {}): Promise<Readable> {
    const key = this.key(name);
    const offset = options.offset ?? 0;
    let response: Response;
    try {
      response = await this.client.request('GET', key, {
        headers: offset > 0 ? { range: `bytes=${offset}-` } : {},
      });
    } catch (err) {
      throw swiftFailure(this.config, `get "${name}"`, err);
    }
    if (response.status === 404) {
      await drain(response);
      throw new ObjectNotFoundError(this.location, name);
    }
    if (!response.ok || !response.body) {
      const text = await response.text().catch(() => '');
      throw swiftFailure(this.config, `get "${name}"`, new SwiftHttpError(response.status, text.slice(0, 300)));
    }
    return Readable.fromWeb(response.body as import('node:stream/web').ReadableStream);
  }

  async list(prefix = ''): Promise<StoredObject[]> {
    try {
      const listed = await this.listKeys(listingPrefix(this.config.prefix, prefix));
      const keys = listed.map((o) => o.name);
      const out: StoredObject[] = [];
      for (const item of listed) {
        if (isSegment(item.name)) continue;
        const name = nameOfKey(this.config.prefix, item.name);
        if (!name) continue;
        let size = item.bytes;
        // ebr's dynamic large objects list as their empty manifest: their size is the sum the HEAD reports.
        if (size === 0 && segmentsOf(item.name, keys).length > 0) size = (await this.stat(name))?.size ?? 0;
        out.push({ name, size, lastModified: listingDate(item.last_modified), metadata: {} });
      }
      return out.sort(byName);
    } catch (err) {
      throw swiftFailure(this.config, `list "${prefix}"`, err);
    }
  }

  async stat(name: string): Promise<StoredObject | undefined> {
    const key = this.key(name);
    try {
      const response = await this.client.request('HEAD', key);
      await drain(response);
      if (response.status === 404) return undefined;
      if (!response.ok) throw new SwiftHttpError(response.status, `HEAD ${key}: ${response.status}`);
      const metadata: Record<string, string> = {};
      response.headers.forEach((value, header) => {
        if (header.startsWith(META)) metadata[header.slice(META.length)] = value;
      });
      return {
        name,
        size: Number(response.headers.get('content-length') ?? 0),
        lastModified: new Date(response.headers.get('last-modified') ?? 0),
        metadata,
      };
    } catch (err) {
      throw swiftFailure(this.config, `stat "${name}"`, err);
    }
  }

  /** The object (a manifest or a whole one), then whatever segments are under its name. */
  async delete(name: string): Promise<void> {
    const key = this.key(name);
    try {
      const response = await this.client.request('DELETE', key);
      await drain(response);
      if (!response.ok && response.status !== 404) {
        throw new SwiftHttpError(response.status, `DELETE ${key}: ${response.status}`);
      }
      await this.deleteSegments(key, sendOnce);
    } catch (err) {
      throw swiftFailure(this.config, `delete "${name}"`, err);
    }
  }

  /** Deletes the segments under `key/`, but those of the upload stamped `keep`. */
  private async deleteSegments(key: string, send: RequestSender, keep?: string): Promise<void> {
    const listed = await send(() => this.listKeys(`${key}/`));
    const stale = segmentsOf(
      key,
      listed.map((o) => o.name),
    ).filter((segment) => !keep || !segment.slice(key.length + 1).startsWith(`${keep}.`));
    await deleteAll(this.client, stale, send);
  }

  /** Every object whose key starts with `prefix`, in Swift's order, page after page. */
  private async listKeys(prefix: string): Promise<Listed[]> {
    const out: Listed[] = [];
    let marker = '';
    for (;;) {
      const text = await this.client.expectOk('GET', undefined, {
        query: { format: 'json', prefix, marker, limit: String(PAGE) },
      });
      const page = JSON.parse(text) as Listed[];
      out.push(...page);
      if (page.length < PAGE) return out;
      marker = page[page.length - 1].name;
    }
  }

  private key(name: string): string {
    checkObjectName(name);
    return objectKey(this.config.prefix, name);
  }
}

/** Swift lists times in UTC without saying so: `2026-11-27T05:24:20.123450`. */
function listingDate(value: string): Date {
  return new Date(/Z|[+-]\d\d:?\d\d$/.test(value) ? value : `${value}Z`);
}

export async function openSwiftStore(
  location: StoreLocation,
  policy: RetryPolicy,
  env: NodeJS.ProcessEnv = process.env,
): Promise<SwiftStore> {
  const store = new SwiftStore(await swiftConfig(location, env), env);
  await retry(() => store.check(), policy);
  return store;
}
