import { constants, type NodeGCPerformanceDetail, PerformanceObserver } from 'node:perf_hooks';
import { garbageReleased, uploadInParts } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';

const MiB = 1 << 20;

function times(n: number, work: () => void): void {
  for (let i = 0; i < n; i++) work();
}

/** The full collections that `work` forces, seen as V8 reports them. */
async function forcedCollections(work: () => void): Promise<number> {
  garbageReleased(0); // starts the count from nothing: with no upload in flight, a collection at once
  let forced = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const { kind, flags } = (entry as typeof entry & { detail: NodeGCPerformanceDetail }).detail;
      if (kind === constants.NODE_PERFORMANCE_GC_MAJOR && flags & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED) forced++;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  work();
  await new Promise((resolve) => setTimeout(resolve, 50)); // the entries come after the collections
  observer.disconnect();
  return forced;
}

describe('the collection that follows the dead parts', () => {
  it('collects at once what is released with no upload in flight', async () => {
    expect(await forcedCollections(() => times(3, () => garbageReleased(MiB)))).toBe(3);
  });

  it('collects after every part of a single upload', async () => {
    const upload = uploadInParts(4 * MiB);
    expect(await forcedCollections(() => times(3, () => upload.sent(4 * MiB)))).toBe(3);
    upload.end();
  });

  it('collects once per N parts of N uploads at once, and as before once the others end', async () => {
    const uploads = [1, 2, 3, 4].map(() => uploadInParts(4 * MiB));
    const eightParts = () => {
      for (const upload of uploads) times(2, () => upload.sent(4 * MiB));
    };
    expect(await forcedCollections(eightParts)).toBe(2);
    for (const upload of uploads.slice(1)) {
      upload.end();
      upload.end(); // ending twice counts once
    }
    expect(await forcedCollections(() => uploads[0].sent(4 * MiB))).toBe(1);
    uploads[0].end();
  });
});
