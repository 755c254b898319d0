import { join } from 'node:path';
import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import { IntegrityError } from '../common/errors.js';
import type { Fetched } from '../common/ordered-prefetch.js';
import type { ChainBase } from '../format/decompressed-limit.js';
import type { FullSnapshotFacts } from '../format/full-snapshot-check.js';

/**
 * Where a replay's files come from: fetched, decompressed and checked from the store in the replaying thread
 * (store-source.ts), or by another thread that hands the files over (restore/chain-feed.ts), so that the thread
 * that replays loads neither a store's client nor a decompressor (this module holds what both share), and fetching
 * runs beside the replay.
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

/** The full snapshot of a chain failed verification, or is gone: a caller may fall back to an older chain. */
export class UnusableFullSnapshotError extends IntegrityError {}

/** Where a delta's decompressed file goes in a replay's work dir. */
export function deltaFile(workDir: string, entry: CatalogEntry): string {
  return join(workDir, 'deltas', `${entry.name.replaceAll('/', '_')}.json`);
}

/** Where the full snapshot's db goes in a replay's work dir (the direct engine extends it in place). */
export function baseFile(workDir: string): string {
  return join(workDir, 'base.db');
}
