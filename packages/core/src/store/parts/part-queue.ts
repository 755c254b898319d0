import type { Readable } from 'node:stream';
import { collectGarbage } from '../../common/memory-bound.js';
import { partBuffers } from './part-buffers.js';

/**
 * Streams a body to a store in parts: cut into `partSize` pieces, at most `partsInFlight` sent at once, so memory
 * stays near partSize × (partsInFlight + 1) whatever the object size. The first failure (or the caller's abort)
 * stops reading, cancels the parts in flight through the signal each one gets, and waits for them to settle, so
 * that the caller's clean-up never races a late part.
 */
export interface PartQueueOptions {
  partSize: number;
  partsInFlight: number;
  signal?: AbortSignal;
}

export type PartSender = (index: number, data: Buffer, signal: AbortSignal) => Promise<unknown>;

/**
 * A body's parts, each in a buffer used again once the part is sent (part-buffers.ts): a part must not be looked at
 * after its `release`.
 */
export interface Parts extends AsyncIterable<Buffer> {
  /** A part sent: its buffer takes a later part. */
  release(part: Buffer): void;
  /** No more parts are wanted: the buffers kept for them go. Once; a release after it is harmless. */
  end(): void;
}

/**
 * Resolves with the number of parts sent (0 for an empty body). `parts` are the body's parts when the caller has
 * begun cutting it itself (to look at the first ones); the body is still what a stop destroys.
 */
export async function sendInParts(
  body: Readable,
  options: PartQueueOptions,
  sendPart: PartSender,
  parts: Parts = cutIntoParts(body, options.partSize),
): Promise<number> {
  const controller = new AbortController();
  // Destroying the body wakes a loop that waits for data which may never come (a hung source).
  const stop = (reason?: unknown) => {
    controller.abort(reason);
    body.destroy();
  };
  const onAbort = () => stop(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const inFlight = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  let count = 0;
  try {
    options.signal?.throwIfAborted();
    for await (const data of parts) {
      if (failure || controller.signal.aborted) break;
      const index = count++;
      const sending: Promise<void> = sendPart(index, data, controller.signal)
        .then(() => undefined)
        .catch((error: unknown) => {
          failure ??= { error };
          stop(error);
        })
        .finally(() => {
          inFlight.delete(sending);
          parts.release(data);
        });
      inFlight.add(sending);
      if (inFlight.size >= options.partsInFlight) await Promise.race(inFlight);
    }
  } catch (error) {
    failure ??= { error };
    stop(error);
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
  }
  await Promise.allSettled(inFlight);
  parts.end();
  if (options.signal?.aborted) throw options.signal.reason;
  if (failure) throw failure.error;
  if (controller.signal.aborted) throw controller.signal.reason;
  return count;
}

/**
 * A step a store takes between cutting a body into parts and handing them to sendInParts (the creation of a
 * multipart upload): until sendInParts has them the parts are the caller's, so a step that fails ends them, and
 * their buffers can go.
 */
export async function beforeSending<T>(parts: Parts, step: Promise<T>): Promise<T> {
  try {
    return await step;
  } catch (err) {
    parts.end();
    throw err;
  }
}

/** Exactly `size` bytes a part, the last one shorter; nothing at all for an empty body. */
export function cutIntoParts(body: Readable, size: number): Parts {
  const buffers = partBuffers(size);
  async function* fill(): AsyncGenerator<Buffer> {
    let part = buffers.take();
    let length = 0;
    for await (const chunk of body) {
      const data = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
      for (let offset = 0; offset < data.length; ) {
        const copied = data.copy(part, length, offset);
        length += copied;
        offset += copied;
        if (length === size) {
          // the body's chunks copied into it are garbage, young and outside V8's heap, which V8 lets pile up
          // (memory-bound.ts): a young collection frees them, ~1 ms
          collectGarbage('minor');
          yield part;
          part = buffers.take();
          length = 0;
        }
      }
    }
    if (length > 0) yield part.subarray(0, length);
    else buffers.give(part);
  }
  return { [Symbol.asyncIterator]: fill, release: buffers.give, end: buffers.end };
}

/**
 * The body whole when it fits in one part (a store then sends it in one request; its buffer is the caller's), or
 * its parts from the first.
 */
export async function wholeOrParts(parts: Parts): Promise<{ whole: Buffer; parts?: undefined } | { parts: Parts }> {
  const cut = parts[Symbol.asyncIterator]();
  try {
    const first = await cut.next();
    const second = first.done ? first : await cut.next();
    if (second.done) {
      parts.end();
      return { whole: first.done ? Buffer.alloc(0) : first.value };
    }
    async function* all(): AsyncGenerator<Buffer> {
      yield first.value;
      yield second.value;
      for (let next = await cut.next(); !next.done; next = await cut.next()) yield next.value;
    }
    return { parts: { ...parts, [Symbol.asyncIterator]: all } };
  } catch (err) {
    parts.end();
    throw err;
  }
}
