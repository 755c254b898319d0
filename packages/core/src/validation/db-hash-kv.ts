import { closeSync, openSync } from 'node:fs';
import { BboltReader, type BucketValue, leafElements } from '../bbolt/bbolt-file.js';
import { compactionMarks, storeRevision } from '../bbolt/db-file-revision.js';
import { isTombstoneKey, mainRevision } from '../bbolt/revision-key.js';
import { IntegrityError, UsageError } from '../common/errors.js';
import { collectGarbage, PAGES_PER_COLLECTION } from '../common/memory-bound.js';
import { crc32c } from '../wal/crc32c.js';
import { userKey } from './db-keyspace.js';
import { NewestRows } from './newest-rows.js';

/** etcd's HashKV of a db file at a revision, as a member holding that history would answer it. */
export interface DbHashKV {
  hash: number;
  revision: number;
  compactRevision: number;
  /** `key` bucket rows the hash covers. */
  rows: number;
}

export interface DbHashKVOptions {
  /** The revision to hash at: at most the db's revision. */
  revision: number;
  /** The compaction to hash as (the live member's `compact_revision`): at least the db's own compaction. */
  compactRevision: number;
  /** Where the key index's sorted runs go when it outgrows `memoryBudget` (NewestRows). */
  tmpDir: string;
  memoryBudget?: number;
}

/** The Map of keys held before a sorted run goes to disk (as the restore's keyspace read). */
const MEMORY_BUDGET = 32 << 20;
const KEY_BUCKET = Buffer.from('key');

/** What a db's history allows: its revision and the compaction it went through (0: none). */
export interface DbHistory {
  revision: number;
  compactRevision: number;
}

/** The revision and compaction marks of a db file (a few pages). */
export function dbHistory(path: string): DbHistory {
  const fd = openSync(path, 'r');
  try {
    const reader = new BboltReader(fd);
    const meta = reader.buckets().get('meta');
    const marks = meta ? compactionMarks(reader.elements(meta)) : [];
    return { revision: storeRevision(reader), compactRevision: Math.max(0, ...marks) };
  } finally {
    closeSync(fd);
  }
}

/**
 * etcd's `HashKV(revision)` computed from a db file, without etcd (the rule: docs/proof.md). A db rebuilt from
 * backups holds every row since its full snapshot's compaction; this hashes it as a member compacted at
 * `compactRevision` would: every `key` row of a revision in (compactRevision, revision], and below that only
 * the rows etcd's index keeps at `revision` (each key's newest row at or below `revision`, when it is not a
 * tombstone; when no key is live at `revision`, each key's newest row at or below `compactRevision` that is not a
 * tombstone, which is what a compaction leaves in the file).
 *
 * Two passes over the bucket, in its (revision) order: the first finds each key's newest row (NewestRows, memory
 * bounded, sorted runs in `tmpDir` past its budget) and marks, in a bitmap over the rows at or below the
 * compaction, those kept; the second feeds the CRC in revision order. Memory: the bitmap (a bit a row) and a
 * number a leaf page, besides the bounded key index.
 */
export function dbHashKV(path: string, options: DbHashKVOptions): DbHashKV {
  const { revision, compactRevision } = options;
  const history = dbHistory(path);
  if (revision > history.revision || revision < 1) {
    throw new UsageError(`cannot hash the db at revision ${revision}: it holds revisions up to ${history.revision}`);
  }
  if (compactRevision > revision) {
    throw new UsageError(`cannot hash at revision ${revision} as compacted at ${compactRevision}, a later revision`);
  }
  if (compactRevision < history.compactRevision) {
    throw new UsageError(
      `cannot hash the db as compacted at revision ${compactRevision}: it was compacted at ${history.compactRevision} already, and the rows in between are gone`,
    );
  }
  const fd = openSync(path, 'r');
  try {
    const reader = new BboltReader(fd);
    const bucket = reader.buckets().get('key');
    if (!bucket) throw new IntegrityError('the db has no "key" bucket: it is not an etcd database');
    const kept = keptRows(reader, bucket, options);
    let hash = crc32c(0, KEY_BUCKET);
    let ordinal = 0;
    let rows = 0;
    let pages = 0;
    for (const leaf of reader.leaves(bucket)) {
      if (++pages % PAGES_PER_COLLECTION === 0) collectGarbage('minor');
      for (const row of leafElements(leaf.page)) {
        const main = mainRevision(row.key);
        if (main > revision) return { hash, revision, compactRevision, rows };
        const at = ordinal++;
        if (main <= compactRevision && !kept.has(at)) continue;
        hash = crc32c(crc32c(hash, row.key), row.value);
        rows++;
      }
    }
    return { hash, revision, compactRevision, rows };
  } finally {
    closeSync(fd);
  }
}

/** The rows at or below the compaction that the hash takes, by their position in the bucket. */
function keptRows(reader: BboltReader, bucket: BucketValue, options: DbHashKVOptions): RowBitmap {
  const { revision, compactRevision } = options;
  const atOrBelowCompaction = countRows(reader, bucket, compactRevision);
  const kept = new RowBitmap(atOrBelowCompaction.rows);
  if (atOrBelowCompaction.rows === 0) return kept;
  // etcd's index at `revision`: each live key's newest row; those at or below the compaction are kept.
  let anyLive = false;
  newestRows(reader, bucket, revision, options, (ordinal, tombstone) => {
    if (tombstone) return;
    anyLive = true;
    if (ordinal < atOrBelowCompaction.rows) kept.set(ordinal);
  });
  // With no key live at `revision`, etcd keeps nothing and hashes every row the compaction left in the file.
  if (!anyLive) {
    newestRows(reader, bucket, compactRevision, options, (ordinal, tombstone) => {
      if (!tombstone) kept.set(ordinal);
    });
  }
  return kept;
}

/** The number of rows at or below `limit`: the first rows of the bucket. */
function countRows(reader: BboltReader, bucket: BucketValue, limit: number): { rows: number } {
  let rows = 0;
  for (const leaf of reader.leaves(bucket)) {
    const elements = leafElements(leaf.page);
    const last = elements.at(-1);
    if (last && mainRevision(last.key) <= limit) {
      rows += elements.length;
      continue;
    }
    for (const row of elements) {
      if (mainRevision(row.key) > limit) return { rows };
      rows++;
    }
  }
  return { rows };
}

/**
 * Each key's newest row at or below `limit`: `onRow(ordinal, tombstone)` once a key, the ordinal its row's position
 * in the bucket. Empty rows (a revision-bumping restore's placeholder, docs/etcd-formats.md §4.2) are no key's.
 */
function newestRows(
  reader: BboltReader,
  bucket: BucketValue,
  limit: number,
  options: DbHashKVOptions,
  onRow: (ordinal: number, tombstone: boolean) => void,
): void {
  const index = new NewestRows({ tmpDir: options.tmpDir, memoryBudget: options.memoryBudget ?? MEMORY_BUDGET });
  try {
    // A leaf's first ordinal, by the leaf's position in the walk: NewestRows keeps a row's place as (page, element).
    const firstOrdinal: number[] = [];
    let ordinal = 0;
    let pages = 0;
    walk: for (const leaf of reader.leaves(bucket)) {
      if (++pages % PAGES_PER_COLLECTION === 0) collectGarbage('minor');
      const leafIndex = firstOrdinal.length;
      firstOrdinal.push(ordinal);
      const elements = leafElements(leaf.page);
      for (let element = 0; element < elements.length; element++) {
        const row = elements[element];
        if (mainRevision(row.key) > limit) break walk;
        ordinal++;
        if (row.value.length === 0) continue;
        index.add(userKey(row.value, leaf.id, element), { page: leafIndex, element }, isTombstoneKey(row.key), false);
      }
    }
    for (const row of index.inKeyOrder()) onRow(firstOrdinal[row.page ?? 0] + row.element, row.tombstone);
  } finally {
    index.close();
  }
}

/** A bit a row. */
class RowBitmap {
  private readonly bits: Uint8Array;

  constructor(rows: number) {
    this.bits = new Uint8Array(Math.ceil(rows / 8));
  }

  set(row: number): void {
    this.bits[row >>> 3] |= 1 << (row & 7);
  }

  has(row: number): boolean {
    return (this.bits[row >>> 3] & (1 << (row & 7))) !== 0;
  }
}
