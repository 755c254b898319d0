import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { SnapshotChain } from '../backup/snapshot-chain.js';
import type { Logger } from '../common/logger.js';
import type { FullSnapshotFacts } from '../format/full-snapshot-check.js';
import { baseFile, type ChainSource, deltaFile, type EarlyBase } from '../replay/chain-source.js';
import { storeSource } from '../replay/store-source.js';
import { openStore } from '../store/location.js';
import type { SnapStore } from '../store/snapstore.js';
import { described, type FeedMessage } from './feed-messages.js';

/*
 * A restore's chain fetched by the restore's own thread and handed to the replay thread (chain-from-parent.ts) file by file, so that the
 * replay thread loads neither a store's client nor a decompressor, and fetching runs beside it: the full snapshot
 * and the first deltas from the moment the feed starts (while the replay thread starts), the other deltas while
 * it replays (fetching one, reading, decompressing and its sha256 checks, costs about half what replaying it does).
 * The replay thread asks what the full snapshot's name and metadata say of it (`early`) and for the full snapshot
 * itself (`full`), each answered once known; the deltas' files come in the chain's order (`delta`) from its first
 * message on, before the full snapshot is in (a prepared engine takes them then: ReplayEngine.prepare), fetched
 * `concurrency` ahead, and the next is handed over only once the replay took the one before (`took`), so the disk
 * holds `concurrency` + 1 delta files, as a replay that fetches for itself holds.
 */

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
