import { mkdir, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fetchDelta } from '../backup/fetch-delta.js';
import { fetchFullSnapshot } from '../backup/fetch-full-snapshot.js';
import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import type { SnapshotChain } from '../backup/snapshot-chain.js';
import { METADATA_DB_SIZE } from '../backup/take-full-snapshot.js';
import type { ParentChannel } from '../common/child-process.js';
import { errorMessage, IntegrityError, OperationError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import { type Fetched, prefetchInOrder } from '../common/ordered-prefetch.js';
import { type ChainBase, decompressedLimit, recordedSize } from '../format/decompressed-limit.js';
import type { FullSnapshotFacts } from '../format/full-snapshot-check.js';
import {
  baseFile,
  type ChainSource,
  deltaFile,
  UnusableFullSnapshotError,
  unusableFullSnapshot,
} from '../replay/chain-source.js';
import { openStore } from '../store/location.js';
import type { SnapStore } from '../store/snapstore.js';

/*
 * A restore's chain fetched by the restore's own thread and handed to the replay thread file by file, so that the
 * replay thread loads neither a store's client nor a decompressor, and fetching runs beside it: the full snapshot
 * and the first deltas from the moment the feed starts (while the replay thread starts), the other deltas while
 * it replays (fetching one, reading, decompressing and its sha256 checks, costs about half what replaying it does).
 * The replay thread asks for the full snapshot (`full`) and is answered once it is in; the deltas' files come in
 * the chain's order (`delta`), fetched `concurrency` ahead, and the next is handed over only once the replay took
 * the one before (`took`), so the disk holds `concurrency` + 1 delta files, as a replay that fetches for itself
 * holds.
 */

type Described = { name: string; message: string };
type FeedMessage =
  | { type: 'full' }
  | { type: 'full-in'; location: string; facts?: FullSnapshotFacts; error?: Described }
  | { type: 'took'; index: number }
  | { type: 'delta'; index: number; file?: string; error?: Described };

/** The restore's side: started with the replay thread, stopped when the replay has ended. */
export class ChainFeed {
  private readonly controller = new AbortController();
  private readonly store: Promise<SnapStore>;
  private readonly full: Promise<FullSnapshotFacts>;
  private took = -1;
  private wake?: () => void;
  private deltas?: Promise<void>;
  /** How to reach the replay thread, once it has been told about the full snapshot. */
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
    },
  ) {
    const signal = this.controller.signal;
    this.store = openStore(options.storeUrl, { encryptionKeyFile: options.encryptionKeyFile }).then(async (store) => {
      await mkdir(dirname(deltaFile(options.workDir, options.chain.full)), { recursive: true });
      return store;
    });
    this.full = this.store.then((store) =>
      fetchFullSnapshot(store, options.chain.full, baseFile(options.workDir), { logger: options.logger, signal }),
    );
    this.full.catch(() => {}); // handed to the replay thread when it asks
    this.deltas = this.feedDeltas(earlyBase(options.chain.full));
  }

  /** runChild's onMessage. */
  readonly onMessage = (message: { type: string }, send: (message: object) => void): void => {
    const m = message as FeedMessage;
    if (m.type === 'full') void this.answerFull(send);
    if (m.type === 'took') this.took = m.index;
    this.wake?.();
  };

  private async answerFull(send: (message: FeedMessage) => void): Promise<void> {
    const store = await this.store.catch(() => undefined);
    const location = store?.location ?? this.options.storeUrl;
    try {
      send({ type: 'full-in', location, facts: await this.full });
      this.send = send;
      this.wake?.();
    } catch (err) {
      send({
        type: 'full-in',
        location,
        error: described(unusableFullSnapshot(err, `${location}/${this.options.chain.full.name}`)),
      });
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

  private async feedDeltas(base: ChainBase): Promise<void> {
    const { chain, workDir } = this.options;
    const signal = this.controller.signal;
    const store = await this.store.catch(() => undefined);
    if (!store) return; // the full snapshot's answer says why
    let index = 0;
    const fetched = prefetchInOrder(
      chain.deltas,
      async (entry, fetchSignal) => {
        await fetchDelta(store, entry, deltaFile(workDir, entry), { signal: fetchSignal, base });
        return deltaFile(workDir, entry);
      },
      { concurrency: this.options.concurrency, signal, discard: (file) => rm(file, { force: true }) },
    );
    try {
      for await (const outcome of fetched) {
        // handed over one at a time, once the replay thread has the full snapshot and took the one before
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
 * The chain's base as the deltas' size bound needs it (fetchDelta), before the full snapshot is in: the revision
 * its name says (it may hold a later one: etcd#9037) and the most its db may be (what its own decompression is held
 * to). Both can only be above the full snapshot's real ones, so the bound can only be looser, and no looser than
 * the bound by the compression ratio every object is held to.
 */
function earlyBase(full: CatalogEntry): ChainBase {
  return {
    revision: full.lastRevision,
    dbSize: decompressedLimit(full.size, recordedSize(full.metadata[METADATA_DB_SIZE])),
  };
}

/** The replay thread's side: its ChainSource, from the restore's thread (the store as `storeUrl` names it, until the restore says how it does). */
export function chainFromParent(parent: ParentChannel, storeUrl: string, deltas: readonly CatalogEntry[]): ChainSource {
  const arrived: FeedMessage[] = [];
  let wake: (() => void) | undefined;
  parent.onMessage((message) => {
    if (message.type !== 'delta' && message.type !== 'full-in') return;
    arrived.push(message as FeedMessage);
    wake?.();
  });
  async function next<T extends FeedMessage['type']>(
    type: T,
    signal?: AbortSignal,
  ): Promise<Extract<FeedMessage, { type: T }>> {
    const onAbort = () => wake?.();
    signal?.addEventListener('abort', onAbort);
    try {
      while (arrived.length === 0) {
        signal?.throwIfAborted();
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    const m = arrived.shift()!;
    if (m.type !== type) throw new OperationError(`the restore sent ${m.type} where ${type} was due`);
    return m as Extract<FeedMessage, { type: T }>;
  }
  let location = storeUrl;
  return {
    get location() {
      return location;
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
