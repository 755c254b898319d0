import { rm } from 'node:fs/promises';
import { fetchDelta } from '../backup/fetch-delta.js';
import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import type { ParentChannel } from '../common/child-process.js';
import { errorMessage, IntegrityError, OperationError } from '../common/errors.js';
import { type Fetched, prefetchInOrder } from '../common/ordered-prefetch.js';
import type { ChainBase } from '../format/decompressed-limit.js';
import { deltaFile } from '../replay/replay-chain.js';
import { openStore } from '../store/location.js';

/*
 * A restore's deltas fetched by the restore's own process and handed to the replay process, file by file: fetching
 * one (reading, decompressing, its two sha256 checks) costs about half what replaying it does, and done in the
 * replay process it ran between its revisions, on the same core. The replay process asks once the full snapshot is
 * in (`deltas`, with the chain's base: fetchDelta's size bound needs it); each delta's file then comes in the
 * chain's order (`delta`), fetched `concurrency` ahead, and the next is handed over only once the replay took the
 * one before (`took`), so the disk holds what the replay's own prefetch held: `concurrency` + 1 files.
 */

type FeedMessage =
  | { type: 'deltas'; base: ChainBase }
  | { type: 'took'; index: number }
  | { type: 'delta'; index: number; file?: string; error?: { name: string; message: string } };

/** The restore's side: started by the replay process's request, stopped when the replay has ended. */
export class DeltaFeed {
  private readonly controller = new AbortController();
  private took = -1;
  private wake?: () => void;
  private running?: Promise<void>;

  constructor(
    private readonly options: {
      storeUrl: string;
      encryptionKeyFile?: string;
      deltas: readonly CatalogEntry[];
      /** The replay's work dir (replay-chain.ts's deltaFile). */
      workDir: string;
      concurrency: number;
    },
  ) {}

  /** runChild's onMessage. */
  readonly onMessage = (message: { type: string }, send: (message: object) => void): void => {
    const m = message as FeedMessage;
    if (m.type === 'deltas' && !this.running) this.running = this.run(m.base, send);
    if (m.type === 'took') {
      this.took = m.index;
      this.wake?.();
    }
  };

  /** Stops fetching and waits for the fetches under way to end (their files go with the work dir). */
  async stop(): Promise<void> {
    this.controller.abort(new Error('the replay has ended'));
    this.wake?.();
    await this.running;
  }

  private async run(base: ChainBase, send: (message: FeedMessage) => void): Promise<void> {
    const { deltas, workDir } = this.options;
    const signal = this.controller.signal;
    let index = 0;
    try {
      const store = await openStore(this.options.storeUrl, { encryptionKeyFile: this.options.encryptionKeyFile });
      try {
        const fetched = prefetchInOrder(
          deltas,
          async (entry, fetchSignal) => {
            await fetchDelta(store, entry, deltaFile(workDir, entry), { signal: fetchSignal, base });
            return deltaFile(workDir, entry);
          },
          { concurrency: this.options.concurrency, signal, discard: (file) => rm(file, { force: true }) },
        );
        for await (const outcome of fetched) {
          while (this.took < index - 1 && !signal.aborted) await new Promise<void>((wake) => (this.wake = wake));
          if (signal.aborted) break;
          send(
            outcome.error === undefined
              ? { type: 'delta', index, file: outcome.value }
              : { type: 'delta', index, error: described(outcome.error) },
          );
          index++;
        }
      } finally {
        await store.close?.();
      }
    } catch (err) {
      // the store could not be opened, say: the replay stops at the delta it waits for, with the reason
      if (!signal.aborted && index < deltas.length) send({ type: 'delta', index, error: described(err) });
    }
  }
}

/** The replay process's side: replayChain's `deltaFiles`, from the restore's process. */
export function deltasFromParent(
  parent: ParentChannel,
  deltas: readonly CatalogEntry[],
): (base: ChainBase, signal?: AbortSignal) => AsyncIterable<Fetched<CatalogEntry, string>> {
  const arrived: Array<Extract<FeedMessage, { type: 'delta' }>> = [];
  let wake: (() => void) | undefined;
  parent.onMessage((message) => {
    if (message.type !== 'delta') return;
    arrived.push(message as Extract<FeedMessage, { type: 'delta' }>);
    wake?.();
  });
  return async function* (base, signal) {
    parent.send({ type: 'deltas', base } satisfies FeedMessage);
    const onAbort = () => wake?.();
    signal?.addEventListener('abort', onAbort);
    try {
      for (let index = 0; index < deltas.length; index++) {
        while (arrived.length === 0) {
          signal?.throwIfAborted();
          await new Promise<void>((resolve) => (wake = resolve));
        }
        const m = arrived.shift()!;
        if (m.index !== index) throw new OperationError(`the restore handed delta ${m.index} over for ${index}`);
        parent.send({ type: 'took', index } satisfies FeedMessage);
        yield m.error === undefined
          ? { item: deltas[index], value: m.file! }
          : { item: deltas[index], error: revived(m.error) };
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  };
}

function described(err: unknown): { name: string; message: string } {
  return { name: (err as Error)?.name ?? 'Error', message: errorMessage(err) };
}

/** The error as replayChain tells them apart: damage (IntegrityError), a missing object (by name), or other. */
function revived(error: { name: string; message: string }): Error {
  if (error.name === 'IntegrityError') return new IntegrityError(error.message);
  const revived = new OperationError(error.message);
  revived.name = error.name;
  return revived;
}
