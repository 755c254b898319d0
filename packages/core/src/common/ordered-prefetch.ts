/** One item's outcome: its value, or why it could not be had (the consumer decides what a failure means). */
export type Fetched<T, R> = { item: T; value: R; error?: undefined } | { item: T; error: unknown; value?: undefined };

/**
 * Runs `fetch` over `items` with at most `concurrency` in flight, and yields the outcomes in the items'
 * order. Work runs ahead of the consumer by at most `concurrency` items, so whatever a fetch holds (a temp
 * file, say) is bounded too. When the consumer stops early, fetches not yet started never start and
 * `signal` is aborted for those in flight; `discard` is called for values nobody consumed.
 */
export async function* prefetchInOrder<T, R>(
  items: readonly T[],
  fetch: (item: T, signal: AbortSignal) => Promise<R>,
  options: { concurrency: number; signal?: AbortSignal; discard?: (value: R) => Promise<void> },
): AsyncGenerator<Fetched<T, R>> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const started: Array<Promise<Fetched<T, R>>> = [];
  const start = (i: number) => {
    started[i] = fetch(items[i], controller.signal).then(
      (value) => ({ item: items[i], value }),
      (error: unknown) => ({ item: items[i], error }),
    );
  };
  let next = 0;
  let consumed = 0;
  try {
    for (; consumed < items.length; consumed++) {
      while (next < items.length && next < consumed + Math.max(1, options.concurrency)) start(next++);
      options.signal?.throwIfAborted();
      const outcome = await started[consumed];
      delete started[consumed];
      yield outcome;
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    controller.abort(new Error('prefetch stopped'));
    const leftovers = await Promise.all(started.filter(Boolean));
    for (const outcome of leftovers)
      if (outcome.error === undefined && options.discard) await options.discard(outcome.value as R);
  }
}
