import { ByteQueue } from '../common/byte-queue.js';
import { IntegrityError } from '../common/errors.js';
import {
  BRANCH_PAGE,
  BUCKET_LEAF_FLAG,
  type BucketValue,
  bucketValue,
  ELEMENT,
  LEAF_PAGE,
  type LeafElement,
  leafElements,
  META_MAGIC,
  PAGE_HEADER,
} from './bbolt-file.js';
import { compactionMarks } from './db-file-revision.js';
import { PageTable, type PageTableOptions } from './page-table.js';

/*
 * Finds the store revision of an etcd snapshot while it streams past, without holding the db. etcd 3.4's
 * snapshot stream carries no revision header, and a revision read before or after the stream may differ
 * from its content; a snapshot named for a revision it does not hold would make the next delta overlap
 * or leave a gap. The revision is what etcd itself computes at start-up: the `main` of the last row in
 * the `key` bucket, raised to the compaction marks in `meta`. (bbolt layout: docs/etcd-formats.md §2–3.)
 *
 * Memory: a window of the page table (a byte and a number per page; page ids come from the meta page, before any
 * other page), the rest of it on disk (page-table.ts), plus the largest single node (a leaf spanning overflow pages),
 * or the largest a free page's stale header claims.
 */

export class SnapshotRevisionScanner {
  private pageSize = 0;
  private rootPage = -1;
  private readonly pending = new ByteQueue();
  private nextPage = 0;
  /** Per page: kind 1 branch, 2 leaf; value a branch's last child, or a leaf's last revision key `main` (NaN when none). */
  private pages = new PageTable(0);
  private rootBuckets?: Map<string, BucketValue>;
  private compaction = new Map<number, number>();
  private done = false;

  constructor(private readonly tableOptions: PageTableOptions = {}) {}

  /** Gives back the page table's file; the scanner answers nothing after. */
  close(): void {
    this.pages.close();
  }

  /**
   * Feed the db bytes in order (a trailing sha256 or partial page is ignored). The stream holds every page below
   * the high-water mark, free ones too, and a free page keeps whatever it last held: a header whose overflow
   * once covered pages that later became nodes of their own. So the scan moves one page at a time, never by a
   * span, and reads a node from each page whose header carries its own id (bbolt writes it into every node).
   */
  write(chunk: Buffer): void {
    if (this.done) return;
    this.pending.push(chunk);
    for (;;) {
      if (this.pageSize === 0) {
        if (this.pending.length < 80) return;
        this.readMeta(this.pending.peek(80));
      }
      if (this.nextPage >= this.pages.pageCount) {
        this.done = true; // past the high-water mark: only etcd's sha256 trailer can follow
        return;
      }
      if (this.pending.length < PAGE_HEADER) return;
      const header = this.pending.peek(PAGE_HEADER);
      const span = this.nodeSpan(header);
      if (this.pending.length < Math.max(span, 1) * this.pageSize) return;
      if (span > 0) this.readNode(this.pending.peek(span * this.pageSize));
      this.pending.skip(this.pageSize);
      this.nextPage++;
    }
  }

  /** How many pages the node starting at the next page spans, or 0 when no node starts there. */
  private nodeSpan(header: Buffer): number {
    const flags = header.readUInt16LE(8);
    if ((flags !== BRANCH_PAGE && flags !== LEAF_PAGE) || header.readBigUInt64LE(0) !== BigInt(this.nextPage)) return 0;
    const overflow = header.readUInt32LE(12);
    return this.nextPage + overflow < this.pages.pageCount ? overflow + 1 : 0;
  }

  /** The snapshot's revision, once every page was written. */
  revision(): number {
    if (this.pageSize === 0 || !this.rootBuckets) {
      throw new IntegrityError('the snapshot is not an etcd bbolt database (no meta or root bucket page)');
    }
    const keyBucket = this.rootBuckets.get('key');
    if (!keyBucket) throw new IntegrityError('the snapshot has no "key" bucket: it is not an etcd database');
    let revision = 1; // an empty key bucket: etcd starts at revision 1
    const last = this.lastKeyRevision(keyBucket);
    if (last !== undefined) revision = last;
    for (const mark of this.compactionMarks()) revision = Math.max(revision, mark);
    return revision;
  }

  private lastKeyRevision(bucket: BucketValue): number | undefined {
    if (bucket.inline) {
      const elements = leafElements(bucket.inline);
      const lastKey = elements[elements.length - 1]?.key;
      return lastKey ? revisionMain(lastKey) : undefined;
    }
    let page = bucket.root;
    for (let depth = 0; depth < 64; depth++) {
      if (!Number.isInteger(page) || page >= this.pages.pageCount) break;
      const { kind, value } = this.pages.get(page);
      if (kind === LEAF_PAGE) return Number.isNaN(value) ? undefined : value;
      if (kind !== BRANCH_PAGE) break;
      page = value;
    }
    throw new IntegrityError(
      `the snapshot's "key" bucket tree is incomplete (page ${page} missing or not a tree page)`,
    );
  }

  private compactionMarks(): number[] {
    const meta = this.rootBuckets?.get('meta');
    if (!meta) return [];
    if (meta.inline) return compactionMarks(leafElements(meta.inline));
    const mark = this.compaction.get(meta.root);
    return mark === undefined ? [] : [mark];
  }

  private readMeta(head: Buffer): void {
    if (head.readUInt32LE(16) !== META_MAGIC) {
      throw new IntegrityError('the snapshot does not start with a bbolt meta page: it is not an etcd snapshot');
    }
    this.pageSize = head.readUInt32LE(24);
    if (this.pageSize < 512 || this.pageSize > 1 << 20 || (this.pageSize & (this.pageSize - 1)) !== 0) {
      throw new IntegrityError(`the snapshot's bbolt page size ${this.pageSize} is not valid`);
    }
    this.rootPage = Number(head.readBigUInt64LE(32));
    const pageCount = Number(head.readBigUInt64LE(56));
    if (this.rootPage >= pageCount || pageCount > 2 ** 32) {
      throw new IntegrityError("the snapshot's bbolt meta page is inconsistent (root page beyond the end)");
    }
    this.pages = new PageTable(pageCount, this.tableOptions);
  }

  private readNode(page: Buffer): void {
    const id = this.nextPage;
    const flags = page.readUInt16LE(8);
    if (flags === BRANCH_PAGE) {
      const count = page.readUInt16LE(10);
      const lastChild = count > 0 ? Number(page.readBigUInt64LE(PAGE_HEADER + (count - 1) * ELEMENT + 8)) : Number.NaN;
      this.pages.set(id, BRANCH_PAGE, lastChild);
    } else {
      this.pages.set(id, LEAF_PAGE, lastRevisionKey(page));
      if (id === this.rootPage) this.rootBuckets = bucketsOf(leafElements(page));
      const mark = compactionMark(page);
      if (mark !== undefined) this.compaction.set(id, mark);
    }
  }
}

function bucketsOf(elements: LeafElement[]): Map<string, BucketValue> {
  const buckets = new Map<string, BucketValue>();
  for (const e of elements) {
    if ((e.flags & BUCKET_LEAF_FLAG) !== 0 && e.value.length >= 16)
      buckets.set(e.key.toString('latin1'), bucketValue(e.value));
  }
  return buckets;
}

/** The `main` of a leaf page's last key when it is a revision key, else NaN; reads no other element. */
function lastRevisionKey(page: Buffer): number {
  const count = page.readUInt16LE(10);
  if (count === 0) return Number.NaN;
  const at = PAGE_HEADER + (count - 1) * ELEMENT;
  const ksize = page.readUInt32LE(at + 8);
  const keyAt = at + page.readUInt32LE(at + 4);
  if ((ksize !== 17 && ksize !== 18) || keyAt + ksize > page.length || page[keyAt + 8] !== 0x5f) return Number.NaN;
  return Number(page.readBigUInt64BE(keyAt));
}

const MARK_NAMES = [Buffer.from('finishedCompactRev'), Buffer.from('scheduledCompactRev')];

/** The highest compaction mark on a leaf page of the `meta` bucket, found without decoding other pages' keys. */
function compactionMark(page: Buffer): number | undefined {
  const count = page.readUInt16LE(10);
  let mark: number | undefined;
  for (let i = 0; i < count; i++) {
    const at = PAGE_HEADER + i * ELEMENT;
    const ksize = page.readUInt32LE(at + 8);
    if ((ksize !== 18 && ksize !== 19) || page.readUInt32LE(at + 12) !== 17) continue;
    const keyAt = at + page.readUInt32LE(at + 4);
    if (keyAt + ksize + 17 > page.length) continue;
    const key = page.subarray(keyAt, keyAt + ksize);
    if (MARK_NAMES.some((n) => n.equals(key))) mark = Math.max(mark ?? 0, Number(page.readBigUInt64BE(keyAt + ksize)));
  }
  return mark;
}

/** `main` of an etcd revision key: 8 bytes big-endian, `_`, 8 bytes sub, optional `t` (tombstone). */
function revisionMain(key: Buffer): number | undefined {
  if ((key.length !== 17 && key.length !== 18) || key[8] !== 0x5f) return undefined;
  return Number(key.readBigUInt64BE(0));
}
