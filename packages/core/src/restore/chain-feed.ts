import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import type { SnapshotChain } from '../backup/snapshot-chain.js';
import type { OnRecovered } from '../backup/stored-versions.js';
import type { ParentChannel } from '../common/child-thread.js';
import { errorMessage, IntegrityError, OperationError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { Fetched } from '../common/prefetch.js';
import type { FullSnapshotFacts } from '../format/full-snapshot-check.js';
import {
  baseFile,
  type ChainSource,
  deltaFile,
  type EarlyBase,
  storeSource,
  UnusableFullSnapshotError,
} from '../replay/chain-source.js';
import { openStore } from '../store/location.js';
import type { SnapStore } from '../store/snapstore.js';

/*
 * A restore's chain fetched by the restore's own thread and handed to the replay thread file by file, so that the
 * replay thread loads neither a store's client nor a decompressor, and fetching runs beside it: the full snapshot
 * and the first deltas from the moment the feed starts (while the replay thread starts), the other deltas while
 * it replays (fetching one, reading, decompressing and its sha256 checks, costs about half what replaying it does).
 * The replay thread asks what the full snapshot's name and metadata say of it (`early`) and for the full snapshot
 * itself (`full`), each answered once known; the deltas' files come in the chain's order (`delta`) from its first
 * message on, before the full snapshot is in (a prepared engine takes them then: ReplayEngine.prepare), fetched
 * `concurrency` ahead, and the next is handed over only once the replay took the one before (`took`), so the disk
 * holds `concurrency` + 1 delta files, as a replay that fetches for itself holds.
 */

type Described = { name: string; message: string };
type FeedMessage =
  | { type: 'early' }
  | { type: 'early-in'; base?: EarlyBase; error?: Described }
  | { type: 'full' }
  | { type: 'full-in'; location: string; facts?: FullSnapshotFacts; error?: Described }
  | { type: 'took'; index: number }
  | { type: 'delta'; index: number; file?: string; error?: Described };

/** The restore's side: started with the replay thread, stopped when the replay has ended. */
export class ChainFeed {
  private readonly controller = new AbortController();
  private readonly store: Promise<SnapStore>;
  private readonly source: Promise<ChainSource>;
  private readonly full: Promise<FullSnapshotFacts>;
  private readonly early: Promise<EarlyBase>;
  private took = -1;
  private wake?: () => void;
  private deltas?: Promise<void>;
  /** How to reach the replay thread, once it has said anything. */
  private send?: (message: FeedMessage) => void;

  constructor(
    private readonly options: {
      storeUrl: string;
      encryptionKeyFile?: string;
      chain: SnapshotChain;
      /** The replay's work dir (chain-source.ts's file names). */
      workDir: string;
      concurrency: number;
      logger: Logger;
      /** Hears of each delta read from a version other than its current one (stored-versions.ts). */
      onRecovered?: OnRecovered;
    },
  ) {
    const signal = this.controller.signal;
    this.store = openStore(options.storeUrl, { encryptionKeyFile: options.encryptionKeyFile });
    // what the replay thread would fetch for itself, fetched here
    this.source = this.store.then(async (store) => {
      await mkdir(dirname(deltaFile(options.workDir, options.chain.full)), { recursive: true });
      return storeSource(store, {
        chain: options.chain,
        workDir: options.workDir,
        maxFetchers: options.concurrency,
        logger: options.logger,
        onRecovered: options.onRecovered,
      });
    });
    this.full = this.source.then((source) =>
      source.fullSnapshot(options.chain.full, baseFile(options.workDir), signal),
    );
    this.full.catch(() => {}); // handed to the replay thread when it asks
    this.early = this.source.then((source) => source.earlyBase!());
    this.early.catch(() => {}); // likewise
    this.deltas = this.feedDeltas();
  }

  /** runChild's onMessage. */
  readonly onMessage = (message: { type: string }, send: (message: object) => void): void => {
    const m = message as FeedMessage;
    // the replay thread is there: the deltas may go to it (a prepared engine takes them before the full snapshot)
    this.send ??= send;
    if (m.type === 'early') {
      this.early.then(
        (base) => send({ type: 'early-in', base } satisfies FeedMessage),
        (err: unknown) => send({ type: 'early-in', error: described(err) } satisfies FeedMessage),
      );
    }
    if (m.type === 'full') void this.answerFull(send);
    if (m.type === 'took') this.took = m.index;
    this.wake?.();
  };

  private async answerFull(send: (message: FeedMessage) => void): Promise<void> {
    const location = (await this.source.catch(() => undefined))?.location ?? this.options.storeUrl;
    try {
      send({ type: 'full-in', location, facts: await this.full });
    } catch (err) {
      send({ type: 'full-in', location, error: described(err) });
    }
  }

  /** Stops fetching and waits for the fetches under way to end (their files go with the work dir). */
  async stop(): Promise<void> {
    this.controller.abort(new Error('the replay has ended'));
    this.wake?.();
    await this.full.catch(() => {});
    await this.deltas;
    await (await this.store.catch(() => undefined))?.close?.();
  }

  private async feedDeltas(): Promise<void> {
    const signal = this.controller.signal;
    const source = await this.source.catch(() => undefined);
    const base = await this.early.catch(() => undefined);
    if (!source || !base) return; // the store could not be opened: the full snapshot's answer says so
    let index = 0;
    const fetched = source.deltaFiles(base, signal);
    try {
      for await (const outcome of fetched) {
        // handed over one at a time, once the replay thread is there and took the one before
        while ((!this.send || this.took < index - 1) && !signal.aborted) {
          await new Promise<void>((wake) => (this.wake = wake));
        }
        if (signal.aborted) break;
        this.send!(
          outcome.error === undefined
            ? { type: 'delta', index, file: outcome.value }
            : { type: 'delta', index, error: described(outcome.error) },
        );
        index++;
      }
    } catch {
      // stopped: the replay has ended
    }
  }
}

/**
 * The replay thread's side: its ChainSource, from the restore's thread (the store as `storeUrl` names it, until the
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

function described(err: unknown): Described {
  return {
    name: err instanceof UnusableFullSnapshotError ? 'UnusableFullSnapshotError' : ((err as Error)?.name ?? 'Error'),
    message: errorMessage(err),
  };
}

/** The error as replayChain tells them apart: an unusable full snapshot, damage (IntegrityError), a missing object (by name), or other. */
function revived(error: Described): Error {
  if (error.name === 'UnusableFullSnapshotError') return new UnusableFullSnapshotError(error.message);
  if (error.name === 'IntegrityError') return new IntegrityError(error.message);
  const revived = new OperationError(error.message);
  revived.name = error.name;
  return revived;
}
