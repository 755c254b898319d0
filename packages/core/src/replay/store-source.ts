import { rm } from 'node:fs/promises';
import { fetchDelta } from '../backup/fetch-delta.js';
import { fetchFullSnapshot, isUnusableFullSnapshot, recordedDbSize } from '../backup/fetch-full-snapshot.js';
import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import type { SnapshotChain } from '../backup/snapshot-chain.js';
import { errorMessage, IntegrityError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import { prefetchInOrder } from '../common/ordered-prefetch.js';
import { decompressedLimit } from '../format/decompressed-limit.js';
import type { SnapStore } from '../store/snapstore.js';
import { type ChainSource, deltaFile, type EarlyBase, UnusableFullSnapshotError } from './chain-source.js';

// A chain's objects fetched, decompressed and checked from the store (chain-source.ts's ChainSource).

/** What the full snapshot's name and metadata say of it, before it is in (EarlyBase). */
export async function earlyBase(store: SnapStore, full: CatalogEntry): Promise<EarlyBase> {
  // a stat that fails leaves the looser bound: the full snapshot's own fetch says what is wrong with the store
  const recorded = await recordedDbSize(store, full).catch(() => undefined);
  return {
    revision: full.lastRevision,
    dbSize: decompressedLimit(full.size, recorded),
    recorded: recorded !== undefined,
  };
}

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
  options: { chain: SnapshotChain; workDir: string; maxFetchers: number; logger?: Logger },
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
          await fetchDelta(store, entry, deltaFile(workDir, entry), { signal: fetchSignal, base });
          return deltaFile(workDir, entry);
        },
        { concurrency: maxFetchers, signal, discard: (file) => rm(file, { force: true }) },
      ),
  };
}
