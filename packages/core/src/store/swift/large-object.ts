import { createHash, randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { UsageError } from '../../common/errors.js';
import { type Parts, sendInParts } from '../parts/part-queue.js';
import type { RequestSender } from '../snapstore.js';
import { drain, type SwiftClient } from './client.js';
import type { SwiftConfig } from './config.js';
import { SwiftHttpError } from './errors.js';

/**
 * Large objects as Swift keeps them: the bytes in segments, then a manifest under the object's own name that
 * reads as the whole. Segments live where ebr puts its own, under `<name>/`, so that ebr's listing takes them
 * for chunks of that snapshot (a name with one more part) and its garbage collection deletes them with it.
 *
 * ebr writes a dynamic large object (a manifest naming a prefix, `<name>/0000000001`, ...). We write a static
 * one (a manifest listing each segment with its size and MD5), which Swift checks when the manifest is put and
 * whose listing shows the whole size. Either reads as one object, so each reads the other's. Our segment names
 * add a stamp of the upload before ebr's number (`<name>/<stamp>.0000000001`): a second put of a name never
 * overwrites the segments that readers of the first are still reading.
 */
const SEGMENT = /^(\d{10}|[0-9a-z]{8,32}\.\d{10})$/;

/** Swift's max_manifest_segments default. */
export const MAX_SEGMENTS = 1000;

/** Whether a listed name is a segment of a large object rather than an object of its own. */
export function isSegment(name: string): boolean {
  const slash = name.lastIndexOf('/');
  return slash > 0 && SEGMENT.test(name.slice(slash + 1));
}

/** The segments of `key` in a listing of keys (or names) under it. */
export function segmentsOf(key: string, listed: readonly string[]): string[] {
  return listed.filter((n) => n.startsWith(`${key}/`) && !n.slice(key.length + 1).includes('/') && isSegment(n));
}

export function newUploadStamp(): string {
  return `${Date.now().toString(36)}${randomBytes(4).toString('hex')}`;
}

export function segmentKey(key: string, stamp: string, index: number): string {
  return `${key}/${stamp}.${String(index + 1).padStart(10, '0')}`;
}

interface ManifestEntry {
  path: string;
  etag: string;
  size_bytes: number;
}

/**
 * Uploads the body as segments (`partSize` each, `partsInFlight` at once; `head` are its first parts, already cut
 * from `parts`), then puts the manifest with the object's metadata. On failure, the segments it sent are deleted
 * (unless the manifest did land after all: a lost answer) and the error is thrown. Resolves with the stamp.
 */
export async function putLargeObject(
  client: SwiftClient,
  config: SwiftConfig,
  key: string,
  body: Readable,
  parts: Parts,
  headers: Record<string, string>,
  send: RequestSender,
  signal?: AbortSignal,
): Promise<string> {
  const stamp = newUploadStamp();
  const manifest: ManifestEntry[] = [];
  const sent: string[] = [];
  let manifestSent = false;
  const { partSize, partsInFlight } = config.transfer;
  try {
    await sendInParts(
      body,
      { partSize, partsInFlight, signal },
      (index, data, partSignal) => {
        if (index >= MAX_SEGMENTS) {
          throw new UsageError(
            `${config.location}: "${key}" needs more than ${MAX_SEGMENTS} segments of ${partSize} bytes: raise ?partSize= in --store`,
          );
        }
        const segment = segmentKey(key, stamp, index);
        const etag = createHash('md5').update(data).digest('hex');
        manifest[index] = { path: `/${config.container}/${segment}`, etag, size_bytes: data.length };
        sent.push(segment);
        // Swift checks the ETag against what it received: a part damaged on the way is refused (422), then sent again.
        return send(
          () => client.expectOk('PUT', segment, { body: data, headers: { etag }, signal: partSignal }),
          partSignal,
        );
      },
      parts,
    );
    signal?.throwIfAborted();
    manifestSent = true;
    // Not cancelled once sent: an abort then could leave the object there while put() fails.
    await send(() =>
      client.expectOk('PUT', key, {
        query: { 'multipart-manifest': 'put' },
        headers: { ...headers, 'content-type': 'application/octet-stream' },
        body: JSON.stringify(manifest),
      }),
    );
    return stamp;
  } catch (err) {
    if (manifestSent && (await landed(client, key, manifest))) return stamp;
    await deleteAll(client, sent, send).catch(() => undefined); // what stays is hidden from listings, and deleted with the name
    throw err;
  }
}

/** Whether the manifest is there and is ours (its ETag is the MD5 of the segments' MD5s), as after a lost answer. */
async function landed(client: SwiftClient, key: string, manifest: ManifestEntry[]): Promise<boolean> {
  if (manifest.length === 0) return false;
  const expected = createHash('md5')
    .update(manifest.map((m) => m.etag).join(''))
    .digest('hex');
  try {
    const response = await client.request('HEAD', key);
    await drain(response);
    return response.ok && (response.headers.get('etag') ?? '').replace(/"/g, '') === expected;
  } catch {
    return false;
  }
}

/** Deletes objects, a few at a time; one already gone is no error. */
export async function deleteAll(client: SwiftClient, keys: readonly string[], send: RequestSender): Promise<void> {
  const queue = [...keys];
  const worker = async () => {
    for (let key = queue.shift(); key !== undefined; key = queue.shift()) {
      const k = key;
      await send(async () => {
        const response = await client.request('DELETE', k);
        await drain(response);
        if (!response.ok && response.status !== 404) {
          throw new SwiftHttpError(response.status, `DELETE ${k}: ${response.status}`);
        }
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(4, queue.length) }, worker));
}
