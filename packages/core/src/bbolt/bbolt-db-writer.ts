import { commitBuckets } from './bbolt-commit.js';
import { type BucketValue, NO_FREELIST } from './bbolt-file.js';
import { LeafBuilder, PageAppender, writeBranches } from './bbolt-page-writer.js';

/**
 * Writes a fresh bbolt db, defragmented by construction: each top-level bucket's rows, given in key order,
 * packed into full leaf pages one after the other, the branches above them, then the root bucket and the two
 * meta pages that make the tree current. No page is free, so no freelist is stored (etcd runs bbolt without
 * one, and bbolt works it out on open when a writer has none). Memory holds the page being filled and the
 * first key of every leaf page, for the branches.
 */
export class BboltDbWriter {
  private readonly pages: PageAppender;
  private readonly buckets: Array<{ name: Buffer } & BucketValue> = [];
  private current?: { name: Buffer; sequence: bigint; leaves: LeafBuilder };

  /** `txid`: the transaction the tree is committed as (any; the source db's keeps it recognisable). */
  constructor(
    private readonly fd: number,
    private readonly meta: { pageSize: number; txid: bigint },
  ) {
    // pages 0 and 1 are the metas; the tree starts right after them
    this.pages = new PageAppender(fd, meta.pageSize, 2);
  }

  /** Starts the next bucket; names must come in bbolt's (bytewise) order. */
  startBucket(name: Buffer, sequence = 0n): void {
    this.endBucket();
    const last = this.buckets.at(-1)?.name;
    if (last && Buffer.compare(last, name) >= 0) {
      throw new Error(
        `bbolt buckets must be written in order: ${name.toString('latin1')} after ${last.toString('latin1')}`,
      );
    }
    this.current = { name: Buffer.from(name), sequence, leaves: new LeafBuilder(this.pages) };
  }

  /** The current bucket's next row, in key order. The buffers must stay unchanged until the next `startBucket`. */
  put(key: Buffer, value: Buffer): void {
    if (!this.current) throw new Error('BboltDbWriter.put before startBucket');
    this.current.leaves.add(key, value);
  }

  /** Writes the root bucket and both metas; returns the db's size in bytes. The caller syncs and closes the file. */
  finish(): number {
    this.endBucket();
    const { pageSize, txid } = this.meta;
    const buckets = new Map(this.buckets.map((b): [string, BucketValue] => [b.name.toString('latin1'), b]));
    const none = { pageSize, root: 0, sequence: 0n, freelist: NO_FREELIST, pgid: 0, txid };
    return commitBuckets(this.fd, this.pages, none, buckets);
  }

  private endBucket(): void {
    if (!this.current) return;
    const { name, sequence, leaves } = this.current;
    this.buckets.push({ name, sequence, root: writeBranches(this.pages, leaves.finish()) });
    this.current = undefined;
  }
}
