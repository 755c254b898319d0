import { closeSync, fsyncSync, openSync } from 'node:fs';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { rowsWith } from '../bbolt/bbolt-commit.js';
import { BboltDbWriter } from '../bbolt/bbolt-db-writer.js';
import { BboltReader, BUCKET_LEAF_FLAG, type BucketValue, leafElements } from '../bbolt/bbolt-file.js';
import { storeRevision } from '../bbolt/db-file-revision.js';
import { isTombstoneKey, mainRevision, revisionKey } from '../bbolt/revision-key.js';
import { IntegrityError, OperationError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { collectGarbage } from '../common/memory-bound.js';
import { appendSha256Trailer } from '../format/sha256-trailer.js';
import { userKey } from '../validation/db-keyspace.js';
import { NewestRows } from '../validation/newest-rows.js';

export interface CompactedDb {
  /** The new db's size in bytes (no trailer). */
  dbBytes: number;
  /** Rows of the `key` bucket kept: one per live key, and the tombstones at the last revision. */
  keptRows: number;
  /** Rows of the `key` bucket dropped: older revisions, tombstones, a bumped restore's placeholders. */
  droppedRows: number;
}

/** The key index's memory before it spills a sorted run to `tmpDir` (as the verification's: ~250k keys). */
const INDEX_BUDGET = 32 << 20;
/** Leaf pages handled between turns of the event loop (the store lock's renewal runs meanwhile) and collections. */
const PAGES_PER_TURN = 256;

/**
 * etcd's compaction at the db's last revision R, then its defragmentation, written straight into a new db file
 * with no etcd (docs/etcd-formats.md §3.3, docs/compact.md). etcd keeps, for each key, the newest revision at
 * or below R, and not even that when it is a tombstone below R (mvcc `keyIndex.compact`: a generation ended by
 * a deletion before R is dropped whole), deletes every other `key` row at or below R (`scheduleCompaction`),
 * and records R as `scheduledCompactRev` and `finishedCompactRev` in `meta`. Here every bucket of `source` is
 * copied row by row, in order, into a fresh file (bbolt-db-writer.ts): `key` filtered so, `meta` with the two
 * marks. The file ends with etcd's sha256 trailer, as `etcdctl snapshot save` receives a db.
 *
 * The `key` bucket is in revision order, so it is read twice: first into an index of each key's newest row
 * (NewestRows: bounded memory, spilling sorted runs to `tmpDir`), which gives the places of the rows to keep;
 * those places, 8 bytes per live key, sorted, then pick the rows on the second pass. The rows themselves
 * stream, a page at a time.
 */
export async function writeCompactedDb(
  source: string,
  target: string,
  options: { revision: number; tmpDir: string; signal?: AbortSignal; indexBudget?: number; logger?: Logger },
): Promise<CompactedDb> {
  const input = openSync(source, 'r');
  try {
    const reader = new BboltReader(input);
    const revision = storeRevision(reader);
    if (revision !== options.revision) {
      throw new OperationError(`the db to compact is at revision ${revision}, not ${options.revision}`);
    }
    const buckets = reader.buckets();
    const keyBucket = buckets.get('key');
    if (!keyBucket) throw new IntegrityError('the db has no "key" bucket: it is not an etcd database');
    const turn = progressTurns(reader.meta, options);
    const kept = await rowsToKeep(reader, keyBucket, revision, options, turn);
    const output = openSync(target, 'wx+', 0o600);
    try {
      const writer = new BboltDbWriter(output, reader.meta);
      let keptRows = 0;
      let droppedRows = 0;
      const names = [...buckets.keys()].map((n) => Buffer.from(n, 'latin1')).sort(Buffer.compare);
      for (const name of names) {
        const bucket = buckets.get(name.toString('latin1'))!;
        writer.startBucket(name, bucket.sequence);
        if (name.toString('latin1') === 'meta') {
          for (const row of withCompactionMarks(reader.elements(bucket), options.revision))
            writer.put(row.key, row.value);
          continue;
        }
        const keyRows = bucket === keyBucket;
        let leaf = 0;
        let next = 0;
        for (const { id, page } of reader.leaves(bucket)) {
          leafElements(page).forEach((row, element) => {
            if ((row.flags & BUCKET_LEAF_FLAG) !== 0) {
              throw new IntegrityError(
                `bucket ${name.toString('latin1')} holds a bucket (bbolt page ${id ?? 'inline'}): etcd nests none`,
              );
            }
            if (!keyRows) {
              writer.put(row.key, row.value);
            } else if (next < kept.length && kept[next] === place(leaf, element)) {
              next++;
              keptRows++;
              writer.put(row.key, row.value);
            } else {
              droppedRows++;
            }
          });
          if (++leaf % PAGES_PER_TURN === 0) await turn('copying the rows kept');
        }
      }
      if (keptRows !== kept.length) {
        throw new OperationError(`the compacted db kept ${keptRows} rows of the ${kept.length} it meant to`);
      }
      const dbBytes = writer.finish();
      appendSha256Trailer(output, dbBytes);
      fsyncSync(output);
      return { dbBytes, keptRows, droppedRows };
    } finally {
      closeSync(output);
    }
  } finally {
    closeSync(input);
  }
}

/**
 * The places of the `key` rows a compaction at the last revision keeps, ascending: each live key's newest row,
 * and the tombstones at that revision. A place is the row's leaf (its ordinal in the bucket's order, not its
 * page id, so that the second pass meets them in this order) and element.
 */
async function rowsToKeep(
  reader: BboltReader,
  keyBucket: BucketValue,
  revision: number,
  options: { tmpDir: string; indexBudget?: number },
  turn: Turn,
): Promise<Float64Array> {
  const index = new NewestRows({ tmpDir: options.tmpDir, memoryBudget: options.indexBudget ?? INDEX_BUDGET });
  try {
    let leaf = 0;
    for (const { id, page } of reader.leaves(keyBucket)) {
      leafElements(page).forEach((row, element) => {
        // an empty value is the placeholder a revision-bumping restore leaves (docs/etcd-formats.md §4.2): not a
        // key's, so no compaction keeps it
        if (row.value.length === 0) return;
        // a tombstone at R itself stays, as etcd keeps it since 3.5.16 (etcd#18274: a watcher from R must see
        // the deletion); the etcd before that dropped it
        const tombstone = isTombstoneKey(row.key) && mainRevision(row.key) < revision;
        index.add(userKey(row.value, id, element), { page: leaf, element }, tombstone, false);
      });
      if (++leaf % PAGES_PER_TURN === 0) await turn('indexing the keys');
    }
    let places = new Float64Array(1024);
    let count = 0;
    for (const row of index.inKeyOrder()) {
      if (row.tombstone) continue;
      if (count === places.length) {
        const grown = new Float64Array(2 * places.length);
        grown.set(places);
        places = grown;
      }
      places[count++] = place(row.page as number, row.element);
      if (count % (PAGES_PER_TURN * 64) === 0) await turn('sorting the rows kept', false);
    }
    return places.subarray(0, count).sort();
  } finally {
    index.close();
  }
}

/** A row's place as one number: a leaf holds fewer than 2^16 elements (bbolt's count is 16 bits). */
function place(leaf: number, element: number): number {
  return leaf * 0x10000 + element;
}

/** The `meta` rows with etcd's two compaction marks at `revision` ({revision, 0}, 17 bytes), in key order. */
function withCompactionMarks(
  rows: Iterable<{ key: Buffer; value: Buffer }>,
  revision: number,
): Array<{ key: Buffer; value: Buffer }> {
  const mark = revisionKey(revision, 0, false);
  const marks = ['scheduledCompactRev', 'finishedCompactRev'].map((name) => ({ key: Buffer.from(name), value: mark }));
  return rowsWith(rows, marks);
}

/** A pause after a batch of pages (or, `page` false, of other work) in the named stage. */
type Turn = (stage: string, page?: boolean) => Promise<void>;

/**
 * Between batches of pages: lets the event loop run (the store lock's renewal, a signal), collects the page
 * buffers read so far, and reports progress at most once a second: the pages read of the db's.
 */
function progressTurns(meta: { pgid: number }, options: { signal?: AbortSignal; logger?: Logger }): Turn {
  const logger = options.logger ?? silentLogger;
  let pages = 0;
  let reported = 0;
  return async (stage, page = true) => {
    if (page) pages += PAGES_PER_TURN;
    if (Date.now() - reported >= 1000) {
      reported = Date.now();
      logger.progress('compacting', { stage, percent: Math.min(100, (50 * pages) / meta.pgid).toFixed(0) });
    }
    collectGarbage('minor');
    await nextTurn();
    options.signal?.throwIfAborted();
  };
}
