import { fetchAsDone, prefetchInOrder } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';

/** A fetch that takes `ms[item]` milliseconds, recording how many run at once and the most there ever were. */
function timedFetch(ms: number[]) {
  const seen = { running: 0, most: 0, started: [] as number[] };
  const fetch = async (item: number, signal: AbortSignal) => {
    seen.started.push(item);
    seen.running++;
    seen.most = Math.max(seen.most, seen.running);
    try {
      await new Promise((resolve) => setTimeout(resolve, ms[item]));
      if (ms[item] > 100) signal.throwIfAborted(); // the slow one notices its abort; the quick ones end anyway
      if (item === 3) throw new Error('item 3 failed');
      return item * 10;
    } finally {
      seen.running--;
    }
  };
  return { fetch, seen };
}

// a slow first item (a full snapshot), then quick ones (deltas)
const SLOW_FIRST = [300, 5, 5, 5, 5, 5, 5, 5];
const items = SLOW_FIRST.map((_, i) => i);

describe('prefetchInOrder and fetchAsDone', () => {
  it('in order: outcomes in the items order, the quick ones after the slow first, at most `concurrency` ahead', async () => {
    const { fetch, seen } = timedFetch(SLOW_FIRST);
    const out = [];
    for await (const o of prefetchInOrder(items, fetch, { concurrency: 3 })) out.push(o.item);
    expect(out).toEqual(items);
    expect(seen.most).toBe(3);
  });

  it('as done: the quick items all pass the slow first one, at most `concurrency` running, each outcome once', async () => {
    const { fetch, seen } = timedFetch(SLOW_FIRST);
    const out: Array<{ item: number; value?: number; error?: unknown }> = [];
    for await (const o of fetchAsDone(items, fetch, { concurrency: 3 })) out.push(o);
    // in order, items 3… could not start before the slow item 0 was consumed; here they all end before it
    expect(out.map((o) => o.item)).toEqual([1, 2, 3, 4, 5, 6, 7, 0]);
    expect(out.find((o) => o.item === 3)?.error).toBeInstanceOf(Error);
    expect(out.find((o) => o.item === 7)?.value).toBe(70);
    expect(seen.most).toBe(3);
    expect(seen.started).toEqual(items);
  });

  it('as done, stopped early: nothing more starts, and the fetches in flight are aborted and awaited', async () => {
    const { fetch, seen } = timedFetch(SLOW_FIRST);
    const discarded: number[] = [];
    const discard = async (value: number) => {
      discarded.push(value);
    };
    for await (const o of fetchAsDone(items, fetch, { concurrency: 4, discard })) {
      if (o.item === 2) break;
    }
    expect(seen.running).toBe(0);
    expect(seen.started).toEqual([0, 1, 2, 3, 4]);
    // item 0 was aborted and item 3 failed: only item 4's value was left for nobody
    expect(discarded).toEqual([40]);
  });
});
