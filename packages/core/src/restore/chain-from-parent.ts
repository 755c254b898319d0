import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import type { ParentChannel } from '../common/child-process.js';
import { OperationError } from '../common/errors.js';
import type { Fetched } from '../common/ordered-prefetch.js';
import type { ChainSource } from '../replay/chain-source.js';
import { type FeedMessage, revived } from './feed-messages.js';

/**
 * The replay thread's side of chain-feed.ts: its ChainSource, from the restore's thread (the store as `storeUrl` names it, until the
 * restore says how it does). Each kind of answer waits in a queue of its own: the deltas may come before the full
 * snapshot.
 */
export function chainFromParent(parent: ParentChannel, storeUrl: string, deltas: readonly CatalogEntry[]): ChainSource {
  const arrived = new Map<string, FeedMessage[]>();
  // the full snapshot and the deltas are waited for at once: every waiter looks again when anything arrives
  const waiting = new Set<() => void>();
  const wakeAll = () => {
    for (const wake of waiting) wake();
    waiting.clear();
  };
  parent.onMessage((message) => {
    if (message.type !== 'delta' && message.type !== 'full-in' && message.type !== 'early-in') return;
    arrived.set(message.type, [...(arrived.get(message.type) ?? []), message as FeedMessage]);
    wakeAll();
  });
  async function next<T extends FeedMessage['type']>(
    type: T,
    signal?: AbortSignal,
  ): Promise<Extract<FeedMessage, { type: T }>> {
    signal?.addEventListener('abort', wakeAll);
    try {
      for (;;) {
        const queue = arrived.get(type);
        if (queue?.length) return queue.shift() as Extract<FeedMessage, { type: T }>;
        signal?.throwIfAborted();
        await new Promise<void>((resolve) => waiting.add(resolve));
      }
    } finally {
      signal?.removeEventListener('abort', wakeAll);
    }
  }
  let location = storeUrl;
  return {
    get location() {
      return location;
    },
    async earlyBase(signal) {
      parent.send({ type: 'early' } satisfies FeedMessage);
      const m = await next('early-in', signal);
      if (m.error) throw revived(m.error);
      return m.base!;
    },
    async fullSnapshot(_entry, _file, signal) {
      parent.send({ type: 'full' } satisfies FeedMessage);
      const m = await next('full-in', signal);
      location = m.location;
      if (m.error) throw revived(m.error);
      return m.facts!;
    },
    async *deltaFiles(_base, signal): AsyncIterable<Fetched<CatalogEntry, string>> {
      for (let index = 0; index < deltas.length; index++) {
        const m = await next('delta', signal);
        if (m.index !== index) throw new OperationError(`the restore handed delta ${m.index} over for ${index}`);
        parent.send({ type: 'took', index } satisfies FeedMessage);
        yield m.error === undefined
          ? { item: deltas[index], value: m.file! }
          : { item: deltas[index], error: revived(m.error) };
      }
    },
  };
}
