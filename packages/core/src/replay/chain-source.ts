import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fetchDelta } from '../backup/fetch-delta.js';
import { fetchFullSnapshot, isUnusableFullSnapshot, recordedDbSize } from '../backup/fetch-full-snapshot.js';
import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import type { SnapshotChain } from '../backup/snapshot-chain.js';
import type { OnRecovered } from '../backup/stored-versions.js';
import { errorMessage, IntegrityError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import { type Fetched, prefetchInOrder } from '../common/prefetch.js';
import { type ChainBase, decompressedLimit } from '../format/decompressed-limit.js';
import type { FullSnapshotFacts } from '../format/full-snapshot-check.js';
import type { SnapStore } from '../store/snapstore.js';

/**
 * Where a replay's files come from: fetched, decompressed and checked from the store in the replaying process
 * (storeSource), or by another process that hands the files over (restore/chain-feed.ts), so that the process
 * that replays loads neither a store's client nor a decompressor, and fetching runs beside the replay.
 */
export interface ChainSource {
  /** The store, as messages name it. */
  readonly location: string;
  /**
   * The chain's full snapshot, decompressed and checked, as a db file at `file`; one that cannot start a chain
   * (damaged, or gone) fails with an UnusableFullSnapshotError.
   */
  fullSnapshot(entry: CatalogEntry, file: string, signal?: AbortSignal): Promise<FullSnapshotFacts>;
  /**
   * The chain's deltas' files, each decompressed and checked, in the chain's order (`base`: fetchDelta's size bound
   * needs it, the full snapshot's or its EarlyBase). Each file is the replay's to delete once applied.
   */
  deltaFiles(base: ChainBase, signal?: AbortSignal): AsyncIterable<Fetched<CatalogEntry, string>>;
  /** What the full snapshot's name and metadata say of it, before it is in (earlyBase). */
  earlyBase?(signal?: AbortSignal): Promise<EarlyBase>;
}

/**
 * A chain's base before its full snapshot is in: the revision its name says (ebr's may hold a later one: etcd#9037)
 * and the most its db may be (with the trailer): the size recorded when it was stored (`recorded`: ours record it),
 * else what its decompression is held to. Each can only be above the real one, so a size bound taken from them can
 * only be looser than the full snapshot's own, and never looser than the compression-ratio bound of every object.
 */
export interface EarlyBase extends ChainBase {
  recorded: boolean;
}

export async function earlyBase(store: SnapStore, full: CatalogEntry): Promise<EarlyBase> {
  // a stat that fails leaves the looser bound: the full snapshot's own fetch says what is wrong with the store
  const recorded = await recordedDbSize(store, full).catch(() => undefined);
  return {
    revision: full.lastRevision,
    dbSize: decompressedLimit(full.size, recorded),
    recorded: recorded !== undefined,
  };
}

/** The full snapshot of a chain failed verification, or is gone: a caller may fall back to an older chain. */
export class UnusableFullSnapshotError extends IntegrityError {}

/**
 * A full snapshot's fetch that failed because the full cannot start a chain (fetch-full-snapshot.ts's
 * isUnusableFullSnapshot) as an UnusableFullSnapshotError naming it; any other failure (the store's, the disk's) as it is.
 */
export function unusableFullSnapshot(err: unknown, label: string): unknown {
  if (err instanceof UnusableFullSnapshotError || !isUnusableFullSnapshot(err)) return err;
  const reason = err instanceof IntegrityError ? err.message : `${label}: ${errorMessage(err)}`;
  return new UnusableFullSnapshotError(reason, { cause: err });
}

/** The store's objects fetched by the replaying process itself, `maxFetchers` deltas ahead. */
export function storeSource(
  store: SnapStore,
  options: { chain: SnapshotChain; workDir: string; maxFetchers: number; logger?: Logger; onRecovered?: OnRecovered },
): ChainSource {
  const { workDir, maxFetchers, logger } = options;
  const { full: chainFull, deltas } = options.chain;
  return {
    location: store.location,
    earlyBase: () => earlyBase(store, chainFull),
    fullSnapshot: (entry, file, signal) =>
      fetchFullSnapshot(store, entry, file, { logger, signal }).catch((err: unknown) => {
        throw unusableFullSnapshot(err, `${store.location}/${entry.name}`);
      }),
    deltaFiles: (base, signal) =>
      prefetchInOrder(
        deltas,
        async (entry, fetchSignal) => {
          await fetchDelta(store, entry, deltaFile(workDir, entry), {
            signal: fetchSignal,
            base,
            onRecovered: options.onRecovered,
          });
          return deltaFile(workDir, entry);
        },
        { concurrency: maxFetchers, signal, discard: (file) => rm(file, { force: true }) },
      ),
  };
}

/** Where a delta's decompressed file goes in a replay's work dir. */
export function deltaFile(workDir: string, entry: CatalogEntry): string {
  return join(workDir, 'deltas', `${entry.name.replaceAll('/', '_')}.json`);
}

/** Where the full snapshot's db goes in a replay's work dir (the direct engine extends it in place). */
export function baseFile(workDir: string): string {
  return join(workDir, 'base.db');
}
