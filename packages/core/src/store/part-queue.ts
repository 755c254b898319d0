import type { Readable } from 'node:stream';
import { uploadInParts } from '../common/memory-bound.js';

/**
 * Streams a body to a store in parts, the shape of lib-storage's Upload: cut into `partSize` pieces, at most
 * `partsInFlight` sent at once, so memory stays near partSize × (partsInFlight + 1) whatever the object size.
 * The first failure (or the caller's abort) stops reading, cancels the parts in flight through the signal
 * each one gets, and waits for them to settle, so that the caller's clean-up never races a late part.
 */
export interface PartQueueOptions {
  partSize: number;
  partsInFlight: number;
  signal?: AbortSignal;
}

export type PartSender = (index: number, data: Buffer, signal: AbortSignal) => Promise<unknown>;

/**
 * Resolves with the number of parts sent (0 for an empty body). `parts` are the body's parts when the caller has
 * begun cutting it itself (to look at the first ones); the body is still what a stop destroys.
 */
export async function sendInParts(
  body: Readable,
  options: PartQueueOptions,
  sendPart: PartSender,
  parts: AsyncIterable<Buffer> = cutIntoParts(body, options.partSize),
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
  const garbage = uploadInParts(options.partSize);
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
          garbage.sent(data.length); // the part sent is garbage now: see memory-bound.ts
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
  garbage.end();
  if (options.signal?.aborted) throw options.signal.reason;
  if (failure) throw failure.error;
  if (controller.signal.aborted) throw controller.signal.reason;
  return count;
}

/** Exactly `size` bytes a part, the last one shorter; nothing at all for an empty body. */
export async function* cutIntoParts(body: Readable, size: number): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let length = 0;
  for await (const chunk of body) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    pending.push(buffer);
    length += buffer.length;
    while (length >= size) {
      const joined = pending.length === 1 ? pending[0] : Buffer.concat(pending, length);
      // Copy a part out of a longer buffer, so the tail left over does not keep the whole of it alive.
      yield joined.length === size ? joined : Buffer.from(joined.subarray(0, size));
      pending = length > size ? [joined.subarray(size)] : [];
      length -= size;
    }
  }
  if (length > 0) yield pending.length === 1 ? pending[0] : Buffer.concat(pending, length);
}
