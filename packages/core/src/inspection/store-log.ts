import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fetchDelta, readDeltaRevisions } from '../backup/fetch-delta.js';
import { fetchFullSnapshot, isUnusableFullSnapshot } from '../backup/fetch-full-snapshot.js';
import { type CatalogEntry, listSnapshots } from '../backup/snapshot-catalog.js';
import type { SnapshotChain } from '../backup/snapshot-chain.js';
import { type OnRecovered, readThroughVersions, versionOf } from '../backup/stored-versions.js';
import { errorMessage } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { prefetchInOrder } from '../common/prefetch.js';
import { METADATA_READ_BACK, parseReadBack, type RevisionRanges, rangeHolding } from '../format/read-back.js';
import type { SnapStore } from '../store/snapstore.js';
import { dbKeys } from './db-keys.js';
import type { KeyFilter } from './key-filter.js';
import { logChain, type RevisionWindow } from './log-chain.js';
import { type LogRow, revisionRows, snapshotRow } from './log-rows.js';

export interface StoreLogOptions {
  filter: KeyFilter;
  window: RevisionWindow;
  /** Recorded times, nanoseconds, both ends included. */
  since?: bigint;
  until?: bigint;
  /** Oldest first (`--reverse`); the default is newest first. */
  oldestFirst?: boolean;
  /** At most this many rows. */
  limit?: number;
  /** A row per key even where one revision wrote several (`--all`). */
  all?: boolean;
  /** Where deltas and the full snapshot are decompressed to, in a folder of the log's own, removed at the end. */
  tmpDir: string;
  /** Deltas fetched ahead of the one being read. */
  maxFetchers?: number;
  logger?: Logger;
  /** Report progress (one line redrawn on a terminal): off where the rows themselves show it. */
  progress?: boolean;
  signal?: AbortSignal;
}

/** What a log gives, in its order: rows, and what it could not read where it would have been. */
export type LogItem =
  | { kind: 'row'; row: LogRow }
  /** A damaged (or vanished) object: its revisions' rows are not shown, as a restore passes over it. */
  | { kind: 'passed-over'; object: string; fromRevision: number; toRevision: number; reason: string }
  /** Revisions in no delta of the store (a delta is missing). */
  | { kind: 'missing'; fromRevision: number; toRevision: number };

/** The chain a log reads and how much of it, known before anything is downloaded. */
export interface LogPlan {
  store: string;
  chain: SnapshotChain;
  /** The deltas read, in the chain's order, each with the revision before the first of its own it shows. */
  deltas: Array<{ entry: CatalogEntry; after: number }>;
  /** Whether the full snapshot's state is in the window (its rows are read from the db). */
  readsFull: boolean;
}

const SECOND = 1_000_000_000n;

/** Lists the store and decides what a log reads (log-chain.ts): a usage error (exit 2) for a window it cannot meet. */
export async function planLog(store: SnapStore, options: StoreLogOptions): Promise<LogPlan> {
  const chain = logChain(await listSnapshots(store, { versions: true }), options.window, store.location);
  const { from = 1, to = chain.lastRevision } = options.window;
  const last = Math.min(to, chain.lastRevision);
  const deltas = chain.deltas
    .map((entry, i) => ({ entry, after: i === 0 ? chain.full.lastRevision : chain.deltas[i - 1].lastRevision }))
    .filter(({ entry, after }) => Math.max(after + 1, entry.startRevision) <= last && entry.lastRevision >= from)
    // a delta taken a whole second or more before --since recorded all its events before it
    .filter(({ entry }) => options.since === undefined || BigInt(entry.createdAt + 1) * SECOND > options.since);
  const taken = BigInt(chain.full.createdAt) * SECOND;
  const readsFull =
    from <= chain.full.lastRevision &&
    (options.since === undefined || taken >= options.since) &&
    (options.until === undefined || taken <= options.until);
  return { store: store.location, chain, deltas, readsFull };
}

/**
 * The log of a store's chain (planLog): every event of the deltas that the filter and the window ask about, a row a
 * key (or a revision's keys of one kind together), then the state of those keys in the full snapshot the chain starts
 * from (their last put or deletion at or before it, in key order); newest first, or oldest first with the full
 * snapshot's state first. Streams: the deltas are fetched `maxFetchers` ahead into temp files, read one at a time,
 * and only one delta's rows are held (to turn them newest first); the full snapshot is decompressed to a file and its
 * keys read from it (db-keys.ts). A damaged object is passed over and named where its rows would have been; the rest
 * is shown. Every temp file goes, however the log ends.
 */
export async function* storeLog(store: SnapStore, plan: LogPlan, options: StoreLogOptions): AsyncGenerator<LogItem> {
  const logger = options.logger ?? silentLogger;
  const dir = await mkdtemp(join(options.tmpDir, 'etcd-restore-log-'));
  const stop = new AbortController();
  const onAbort = () => stop.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  let left = options.limit ?? Number.POSITIVE_INFINITY;
  const { chain } = plan;
  const last = Math.min(options.window.to ?? chain.lastRevision, chain.lastRevision);
  const from = options.window.from ?? 1;
  const shown = (row: LogRow) =>
    row.revision >= from &&
    row.revision <= last &&
    (options.since === undefined || (row.nanos !== undefined && row.nanos >= options.since)) &&
    (options.until === undefined || (row.nanos !== undefined && row.nanos <= options.until));
  // The full snapshot is decompressed beside the deltas, from the start: newest first, it is needed last, and
  // fetching it then would add its whole time to the log's.
  // What was read from a version other than the current one (a snapshot hidden or replaced since it was stored)
  const recovered: OnRecovered = (r) =>
    logger.warn('recovered a snapshot hidden or replaced since it was stored', { ...r });
  const full = plan.readsFull
    ? readThroughVersions(
        chain.full,
        async (version) => {
          // each version into a file of its own: a failed read leaves its bytes behind
          const file = join(dir, `full-${version.versions?.id ?? 'current'}.db`);
          await fetchFullSnapshot(store, version, file, { signal: stop.signal });
          return file;
        },
        isDamaged,
        recovered,
      ).then(
        (file) => ({ file }),
        (failed: unknown) => ({ failed }),
      )
    : undefined;
  try {
    const missing: LogItem | undefined =
      chain.gap && chain.gap.from <= last
        ? {
            kind: 'missing',
            fromRevision: chain.gap.from,
            toRevision: Math.min(chain.gap.to, options.window.to ?? chain.gap.to),
          }
        : undefined;
    if (missing && !options.oldestFirst) yield missing;
    if (options.oldestFirst && full) {
      for await (const item of fullState(plan, dir, full, shown, options)) {
        yield item;
        if (item.kind === 'row' && --left <= 0) return;
      }
    }
    const order = options.oldestFirst ? plan.deltas : [...plan.deltas].reverse();
    const fetched = prefetchInOrder(
      order,
      async ({ entry }, signal) => {
        const file = join(dir, `${entry.startRevision}-${entry.lastRevision}.json`);
        // S3 listings carry no metadata: ask, for what the sidecar recorded of its times
        const metadata =
          Object.keys(entry.metadata).length > 0
            ? entry.metadata
            : (await store.stat(entry.name, versionOf(entry)))?.metadata;
        await fetchDelta(store, entry, file, { signal, onRecovered: recovered });
        return { file, readBack: parseReadBack(metadata?.[METADATA_READ_BACK]) };
      },
      {
        concurrency: options.maxFetchers ?? 4,
        signal: stop.signal,
        discard: async ({ file }) => rm(file, { force: true }),
      },
    );
    let done = 0;
    for await (const outcome of fetched) {
      const { entry, after } = outcome.item;
      const label = `${store.location}/${entry.name}`;
      if (options.progress) logger.progress('reading deltas', { delta: ++done, of: order.length });
      if (outcome.error !== undefined) {
        if (options.signal?.aborted || !isDamaged(outcome.error)) throw outcome.error;
        yield passedOver(entry, after, last, errorMessage(outcome.error));
        continue;
      }
      const { file, readBack } = outcome.value as { file: string; readBack: RevisionRanges | undefined };
      const rows: LogRow[] = [];
      let reached = after;
      let fault: unknown;
      try {
        for await (const revisions of readDeltaRevisions(file, entry, label, { verified: true })) {
          for (const revision of revisions) {
            if (revision.revision <= after || revision.revision > last) continue;
            reached = revision.revision;
            const timeKind = timeKindOf(readBack, revision.revision);
            for (const row of revisionRows(revision.revision, revision.events, options.filter, {
              timeKind,
              object: entry.name,
              all: options.all ?? false,
            })) {
              if (shown(row)) rows.push(row);
            }
          }
          // oldest first, rows go as they come (a limit ends the read)
          if (options.oldestFirst) {
            for (const row of rows.splice(0)) {
              yield { kind: 'row', row };
              if (--left <= 0) return;
            }
          }
        }
      } catch (err) {
        if (options.signal?.aborted || !isDamaged(err)) throw err;
        fault = err;
      } finally {
        await rm(file, { force: true });
      }
      const damaged: LogItem | undefined =
        fault === undefined ? undefined : passedOver(entry, reached, last, errorMessage(fault));
      if (damaged && !options.oldestFirst) yield damaged;
      for (let i = rows.length - 1; i >= 0; i--) {
        yield { kind: 'row', row: rows[i] };
        if (--left <= 0) return;
      }
      if (damaged && options.oldestFirst) yield damaged;
    }
    if (missing && options.oldestFirst) yield missing;
    if (!options.oldestFirst && full) {
      for await (const item of fullState(plan, dir, full, shown, options)) {
        yield item;
        if (item.kind === 'row' && --left <= 0) return;
      }
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    stop.abort(new Error('the log ended'));
    await full;
    await rm(dir, { recursive: true, force: true });
  }
}

/** The full snapshot's state of the keys asked about, in key order, once its download has ended. */
async function* fullState(
  plan: LogPlan,
  dir: string,
  fetched: Promise<{ file?: string; failed?: unknown }>,
  shown: (row: LogRow) => boolean,
  options: StoreLogOptions,
): AsyncGenerator<LogItem> {
  const { full } = plan.chain;
  if (options.progress) options.logger?.progress('reading the full snapshot', { name: full.name });
  const { file, failed } = await fetched;
  if (file === undefined) {
    if (options.signal?.aborted || !isDamaged(failed)) throw failed;
    yield {
      kind: 'passed-over',
      object: full.name,
      fromRevision: 1,
      toRevision: full.lastRevision,
      reason: errorMessage(failed),
    };
    return;
  }
  const taken = BigInt(full.createdAt) * SECOND;
  for await (const key of dbKeys(file, options.filter, {
    atOrBelow: full.lastRevision,
    deleted: true,
    tmpDir: dir,
    signal: options.signal,
  })) {
    const row = snapshotRow(key, taken, full.name);
    if (shown(row)) yield { kind: 'row', row };
  }
}

/**
 * An object that is damaged or gone, which a log passes over as a restore does; anything else (a key the key file
 * lacks, the store or the disk failing) ends the log, exit 1, as it would end a restore.
 */
function isDamaged(err: unknown): boolean {
  return isUnusableFullSnapshot(err);
}

function timeKindOf(readBack: RevisionRanges | undefined, revision: number): LogRow['timeKind'] {
  if (readBack === undefined) return 'unrecorded';
  return rangeHolding(readBack, revision) ? 'read-back' : 'live';
}

function passedOver(entry: CatalogEntry, after: number, last: number, reason: string): LogItem {
  return {
    kind: 'passed-over',
    object: entry.name,
    fromRevision: Math.max(after + 1, entry.startRevision),
    toRevision: Math.min(entry.lastRevision, last),
    reason,
  };
}
