/** One item's outcome: its value, or why it could not be had (the consumer decides what a failure means). */
export type Fetched<T, R> = { item: T; value: R; error?: undefined } | { item: T; error: unknown; value?: undefined };

interface PrefetchOptions<R> {
  concurrency: number;
  signal?: AbortSignal;
  /** Called for values nobody consumed (the consumer stopped early). */
  discard?: (value: R) => Promise<void>;
}

/** `fetch` over `items`, at most `concurrency` at a time, each outcome yielded once. */
type Prefetch = <T, R>(
  items: readonly T[],
  fetch: (item: T, signal: AbortSignal) => Promise<R>,
  options: PrefetchOptions<R>,
) => AsyncGenerator<Fetched<T, R>>;

/**
 * Runs `fetch` over `items` with at most `concurrency` in flight, and yields the outcomes in the items'
 * order. Work runs ahead of the consumer by at most `concurrency` items, so whatever a fetch holds (a temp
 * file, say) is bounded too. When the consumer stops early, fetches not yet started never start and
 * `signal` is aborted for those in flight; `discard` is called for values nobody consumed.
 */
export const prefetchInOrder: Prefetch = (items, fetch, options) => boundedFetch(items, fetch, options, true);

/**
 * As prefetchInOrder, but yields each outcome as its fetch ends: for work whose order does not matter (a copy, a
 * check of every object), where one large item — a full snapshot — must not hold back the small ones after it.
 * In order, the deltas behind a full snapshot waited for it once `concurrency` of them were done.
 */
export const fetchAsDone: Prefetch = (items, fetch, options) => boundedFetch(items, fetch, options, false);

/**
 * The fetches started and not yet yielded are at most `concurrency`: in order, those between the consumer and the
 * newest started; as done, those still running.
 */
async function* boundedFetch<T, R>(
  items: readonly T[],
  fetch: (item: T, signal: AbortSignal) => Promise<R>,
  options: PrefetchOptions<R>,
  inOrder: boolean,
): AsyncGenerator<Fetched<T, R>> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const pending = new Map<number, Promise<{ index: number; outcome: Fetched<T, R> }>>();
  const start = (index: number) => {
    const item = items[index];
    const outcome = fetch(item, controller.signal).then(
      (value): Fetched<T, R> => ({ item, value }),
      (error: unknown): Fetched<T, R> => ({ item, error }),
    );
    pending.set(
      index,
      outcome.then((o) => ({ index, outcome: o })),
    );
  };
  let next = 0;
  try {
    for (let yielded = 0; yielded < items.length; yielded++) {
      while (next < items.length && pending.size < Math.max(1, options.concurrency)) start(next++);
      options.signal?.throwIfAborted();
      const { index, outcome } = await (inOrder ? pending.get(yielded)! : Promise.race(pending.values()));
      pending.delete(index);
      yield outcome;
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    controller.abort(new Error('prefetch stopped'));
    const leftovers = await Promise.all(pending.values());
    for (const { outcome } of leftovers)
      if (outcome.error === undefined && options.discard) await options.discard(outcome.value as R);
  }
}
