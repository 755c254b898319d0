import { writeSync } from 'node:fs';
import {
  type BboltMeta,
  BUCKET_LEAF_FLAG,
  type BucketValue,
  bucketHeader,
  detachedCopy,
  metaPage,
  NO_FREELIST,
} from './bbolt-file.js';
import { LeafBuilder, type PageAppender, writeBranches } from './bbolt-page-writer.js';

/*
 * A bbolt commit made copy-on-write, as bbolt makes its own (docs/etcd-formats.md §2): pages of the tree it
 * replaces stay where they are, new ones are appended after the last page, and two new meta pages make the new
 * tree current. Pages no longer reachable are free, which bbolt works out by itself on open (etcd stores no
 * freelist).
 */

/** A bucket written afresh, on appended pages, from its rows in key order. */
export function writeBucket(
  pages: PageAppender,
  rows: Iterable<{ key: Buffer; value: Buffer }>,
  sequence: bigint,
): BucketValue {
  const leaves = new LeafBuilder(pages);
  for (const row of rows) leaves.add(row.key, row.value);
  return { root: writeBranches(pages, leaves.finish()), sequence };
}

/**
 * A bucket's rows with `set` written over them: each row of `set` replaces the row of its key or joins them, in
 * key order, every row a copy that outlives the pages it was read from.
 */
export function rowsWith(
  rows: Iterable<{ key: Buffer; value: Buffer }>,
  set: Iterable<{ key: Buffer; value: Buffer }>,
): Array<{ key: Buffer; value: Buffer }> {
  const merged = new Map<string, { key: Buffer; value: Buffer }>();
  for (const row of [...rows, ...set]) {
    merged.set(row.key.toString('latin1'), { key: detachedCopy(row.key), value: detachedCopy(row.value) });
  }
  return [...merged.values()].sort((a, b) => Buffer.compare(a.key, b.key));
}

/**
 * Ends a commit whose bucket pages are appended: writes the root bucket naming `buckets`, flushes the pages,
 * then the two metas that make the tree current, the higher txid on page 0 (as bbolt's own snapshot stream
 * writes them). Returns the db's size in bytes: nothing after it belongs to the db.
 */
export function commitBuckets(
  fd: number,
  pages: PageAppender,
  previous: BboltMeta,
  buckets: ReadonlyMap<string, BucketValue>,
): number {
  const root = new LeafBuilder(pages);
  for (const [name, bucket] of [...buckets].sort(([a], [b]) =>
    Buffer.compare(Buffer.from(a, 'latin1'), Buffer.from(b, 'latin1')),
  )) {
    root.add(Buffer.from(name, 'latin1'), bucketHeader(bucket), BUCKET_LEAF_FLAG);
  }
  const rootPage = writeBranches(pages, root.finish());
  pages.flush();
  const next: BboltMeta = {
    ...previous,
    root: rootPage,
    freelist: NO_FREELIST,
    pgid: pages.nextPgid,
    txid: previous.txid + 2n,
  };
  writeSync(fd, metaPage(next, 0), 0, previous.pageSize, 0);
  writeSync(fd, metaPage({ ...next, txid: previous.txid + 1n }, 1), 0, previous.pageSize, previous.pageSize);
  return next.pgid * previous.pageSize;
}
