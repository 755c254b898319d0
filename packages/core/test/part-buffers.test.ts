import { createHash } from 'node:crypto';
import { constants, type NodeGCPerformanceDetail, PerformanceObserver } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { freePartBuffers } from '../src/store/parts/part-buffers.js';
import { beforeSending, cutIntoParts, sendInParts, wholeOrParts } from '../src/store/parts/part-queue.js';

const MiB = 1 << 20;

const digest = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

/** A body of `bytes` bytes in 64 KiB chunks, as a file or a socket gives them; byte i is i % 251. */
function body(bytes: number): Readable {
  let at = 0;
  return new Readable({
    read() {
      if (at >= bytes) return this.push(null);
      const chunk = Buffer.alloc(Math.min(64 * 1024, bytes - at), 0).map((_, i) => (at + i) % 251);
      at += chunk.length;
      this.push(chunk);
    },
  });
}

/** The full collections forced while `work` runs, as V8 reports them. */
async function forcedCollections(work: () => Promise<void>): Promise<number> {
  let forced = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const { kind, flags } = (entry as typeof entry & { detail: NodeGCPerformanceDetail }).detail;
      if (kind === constants.NODE_PERFORMANCE_GC_MAJOR && flags & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED) forced++;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  await work();
  await sleep(50); // the entries come after the collections
  observer.disconnect();
  return forced;
}

describe('parts in buffers used again', () => {
  it('ten uploads at once: each part arrives whole and in order, in no more buffers than the parts in flight, and no full collection for the parts', async () => {
    const partSize = MiB;
    const bytes = 8 * partSize + 1000;
    const distinct = new Set<ArrayBufferLike>();
    // what the server received of each upload: each part's digest by its index (a copy of each would be 80 MiB of
    // garbage of the test's own)
    const received: string[][] = Array.from({ length: 10 }, () => []);
    const uploads = async () => {
      await Promise.all(
        received.map((parts) =>
          sendInParts(body(bytes), { partSize, partsInFlight: 2 }, async (index, data) => {
            distinct.add(data.buffer);
            await sleep(1); // a part in flight, its buffer not to be touched
            parts[index] = digest(data);
          }),
        ),
      );
    };
    const forced = await forcedCollections(uploads);
    const whole = Buffer.alloc(bytes).map((_, i) => i % 251);
    const expected = Array.from({ length: 9 }, (_, i) => digest(whole.subarray(i * partSize, (i + 1) * partSize)));
    for (const parts of received) expect(parts).toEqual(expected);
    // 10 uploads × (2 in flight + 1 being filled): the buffers of 90 parts
    expect(distinct.size).toBeLessThanOrEqual(30);
    // no full collection for the 90 parts (one per part, or per ten parts of ten uploads, before): the one that
    // frees the pool when the last upload ends, and at most one young collection V8 chose to make a full one
    expect(forced).toBeGreaterThanOrEqual(1);
    expect(forced).toBeLessThanOrEqual(2);
    expect(freePartBuffers()).toBe(0);
  });

  it('a body that fits in one part comes whole, to be sent in one request; an empty one as no bytes', async () => {
    const one = await wholeOrParts(cutIntoParts(body(1000), MiB));
    expect(one.parts).toBeUndefined();
    expect(one.parts ? 0 : one.whole.length).toBe(1000);
    const none = await wholeOrParts(cutIntoParts(body(0), MiB));
    expect(none.parts ? -1 : none.whole.length).toBe(0);
    const two = await wholeOrParts(cutIntoParts(body(MiB + 1), MiB));
    const lengths: number[] = [];
    for await (const part of two.parts ?? []) {
      lengths.push(part.length);
      two.parts?.release(part);
    }
    two.parts?.end();
    expect(lengths).toEqual([MiB, 1]);
    expect(freePartBuffers()).toBe(0);
  });

  it("a step before the parts are sent that fails (a multipart upload's creation) ends them: the pool's free buffers go", async () => {
    const cut = await wholeOrParts(cutIntoParts(body(3 * MiB), MiB));
    // another upload of the part size, meanwhile, leaves its buffers free in the pool the two share
    await sendInParts(body(3 * MiB), { partSize: MiB, partsInFlight: 2 }, async () => {});
    expect(freePartBuffers()).toBeGreaterThan(0);
    const refused = new Error('CreateMultipartUpload: access denied');
    await expect(beforeSending(cut.parts!, Promise.reject(refused))).rejects.toBe(refused);
    expect(freePartBuffers()).toBe(0);
  });
});
