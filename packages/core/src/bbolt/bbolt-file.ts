import { readSync } from 'node:fs';
import { IntegrityError } from '../common/errors.js';
import { PageRefList } from './bbolt-page-refs.js';

/*
 * Just enough of bbolt's file format (docs/etcd-formats.md §2) to read an etcd db page by page without mapping it,
 * and to write pages bbolt reads back. Structs are little-endian (every platform we run on); the page size
 * comes from the file, never assumed.
 */

export const PAGE_HEADER = 16;
export const ELEMENT = 16;
export const BRANCH_PAGE = 0x01;
export const LEAF_PAGE = 0x02;
export const META_PAGE = 0x04;
/** A leaf element that is a sub-bucket (etcd's top-level buckets in the root bucket). */
export const BUCKET_LEAF_FLAG = 0x01;
/** meta.freelist when no freelist is stored, as etcd always runs bbolt (NoFreelistSync). */
export const NO_FREELIST = 0xffffffffffffffffn;
export const META_MAGIC = 0xed0cdaed;
const VERSION = 2;

export interface BboltMeta {
  pageSize: number;
  /** Root bucket: its root page and sequence. */
  root: number;
  sequence: bigint;
  freelist: bigint;
  /** High-water mark: pages [0, pgid) are in use. */
  pgid: number;
  txid: bigint;
}

export interface LeafElement {
  flags: number;
  key: Buffer;
  value: Buffer;
}

/** A bucket as its parent's leaf element describes it: a root page, or (root 0) an inline page in the value. */
export interface BucketValue {
  root: number;
  sequence: bigint;
  inline?: Buffer;
}

/** A child of a branch: the smallest key it may hold, and its page. */
export interface PageRef {
  key: Buffer;
  pgid: number;
}

/**
 * A copy that owns its memory. Buffer.from() of a small buffer takes a slice of Node's shared 8 KiB pool, and
 * a long-lived slice keeps the whole pool chunk alive: tens of thousands of page keys would pin gigabytes.
 */
export function detachedCopy(bytes: Buffer): Buffer {
  const copy = Buffer.alloc(bytes.length);
  bytes.copy(copy);
  return copy;
}

/** FNV-1a, 64 bits: bbolt's meta checksum. */
export function fnv1a64(bytes: Buffer): bigint {
  let hash = 0xcbf29ce484222325n;
  for (const b of bytes) hash = BigInt.asUintN(64, (hash ^ BigInt(b)) * 0x100000001b3n);
  return hash;
}

/** The meta on a meta page, or undefined when the page does not validate (magic, version, checksum). */
export function readMeta(page: Buffer): BboltMeta | undefined {
  if (page.length < 80 || page.readUInt32LE(16) !== META_MAGIC || page.readUInt32LE(20) !== VERSION) return undefined;
  if (fnv1a64(page.subarray(16, 72)) !== page.readBigUInt64LE(72)) return undefined;
  return {
    pageSize: page.readUInt32LE(24),
    root: Number(page.readBigUInt64LE(32)),
    sequence: page.readBigUInt64LE(40),
    freelist: page.readBigUInt64LE(48),
    pgid: Number(page.readBigUInt64LE(56)),
    txid: page.readBigUInt64LE(64),
  };
}

/** A whole meta page (page id `id`), checksum included. */
export function metaPage(meta: BboltMeta, id: number): Buffer {
  const page = Buffer.alloc(meta.pageSize);
  page.writeBigUInt64LE(BigInt(id), 0);
  page.writeUInt16LE(META_PAGE, 8);
  page.writeUInt32LE(META_MAGIC, 16);
  page.writeUInt32LE(VERSION, 20);
  page.writeUInt32LE(meta.pageSize, 24);
  page.writeBigUInt64LE(BigInt(meta.root), 32);
  page.writeBigUInt64LE(meta.sequence, 40);
  page.writeBigUInt64LE(meta.freelist, 48);
  page.writeBigUInt64LE(BigInt(meta.pgid), 56);
  page.writeBigUInt64LE(meta.txid, 64);
  page.writeBigUInt64LE(fnv1a64(page.subarray(16, 72)), 72);
  return page;
}

/** The elements of a leaf page starting at `offset` in `buf` (pos counts from each element). */
export function leafElements(buf: Buffer, offset = 0): LeafElement[] {
  const count = buf.readUInt16LE(offset + 10);
  const out: LeafElement[] = [];
  for (let i = 0; i < count; i++) {
    const at = offset + PAGE_HEADER + i * ELEMENT;
    const keyAt = at + buf.readUInt32LE(at + 4);
    const ksize = buf.readUInt32LE(at + 8);
    const vsize = buf.readUInt32LE(at + 12);
    if (keyAt + ksize + vsize > buf.length) throw new IntegrityError('a bbolt leaf element points past its page');
    out.push({
      flags: buf.readUInt32LE(at),
      key: buf.subarray(keyAt, keyAt + ksize),
      value: buf.subarray(keyAt + ksize, keyAt + ksize + vsize),
    });
  }
  return out;
}

export function bucketValue(value: Buffer): BucketValue {
  if (value.length < 16) throw new IntegrityError('a bbolt bucket header is shorter than 16 bytes');
  const root = Number(value.readBigUInt64LE(0));
  return { root, sequence: value.readBigUInt64LE(8), ...(root === 0 ? { inline: value.subarray(16) } : {}) };
}

/** A bucket's header as its parent's leaf element holds it: bucketValue's inverse. */
export function bucketHeader(bucket: BucketValue): Buffer {
  const header = Buffer.alloc(16);
  header.writeBigUInt64LE(BigInt(bucket.root), 0);
  header.writeBigUInt64LE(bucket.sequence, 8);
  return bucket.inline ? Buffer.concat([header, bucket.inline]) : header;
}

/** Pages a sequential walk reads at once. */
const WINDOW_PAGES = 32;

/** Reads a bbolt file by page, with positional reads: memory holds the pages being looked at, not the file. */
export class BboltReader {
  /** The meta bbolt opens with: the valid one of the two with the higher txid (docs/etcd-formats.md §2.2). */
  readonly meta: BboltMeta;
  /** Meta pages (0, 1) that fail magic, version or checksum: bbolt opens with the other one. */
  readonly invalidMetaPages: number[] = [];

  private next = -1;
  private window: { id: number; pages: Buffer } = { id: 0, pages: Buffer.alloc(0) };

  constructor(private readonly fd: number) {
    const first = readMeta(this.read(0, 4096));
    const second = first ? readMeta(this.read(first.pageSize, first.pageSize)) : this.probeSecondMeta();
    if (!first) this.invalidMetaPages.push(0);
    if (!second) this.invalidMetaPages.push(1);
    const meta = first && second ? (second.txid > first.txid ? second : first) : (first ?? second);
    if (!meta) throw new IntegrityError('both bbolt meta pages of the db are damaged (magic, version or checksum)');
    this.meta = meta;
  }

  /**
   * Meta page 1 when page 0 is unreadable, so the page size is unknown: bbolt (≥ 1.3.7) looks for it at every
   * power-of-two offset from 1 KiB to 16 MiB (docs/etcd-formats.md §2.2).
   */
  private probeSecondMeta(): BboltMeta | undefined {
    for (let size = 1024; size <= 16 << 20; size *= 2) {
      try {
        const meta = readMeta(this.read(size, 4096));
        if (meta?.pageSize === size) return meta;
      } catch {
        return undefined; // past the end of the file
      }
    }
    return undefined;
  }

  /** The top-level buckets by name (etcd has no nested ones), their headers copied out of the pages read. */
  buckets(): Map<string, BucketValue> {
    const buckets = new Map<string, BucketValue>();
    for (const e of this.elements({ root: this.meta.root, sequence: this.meta.sequence })) {
      if ((e.flags & BUCKET_LEAF_FLAG) !== 0) buckets.set(e.key.toString('latin1'), bucketValue(detachedCopy(e.value)));
    }
    return buckets;
  }

  /** A page with its overflow pages. */
  page(id: number): Buffer {
    const { pageSize, pgid } = this.meta;
    if (id >= pgid) throw new IntegrityError(`bbolt page ${id} is past the end (${pgid} pages)`);
    // A page right after the last one read starts a window of pages read at once: a walk in file order (the
    // full check of a db this project wrote) costs a read per window, not per page.
    if (id === this.next && !this.windowHolds(id, 1)) {
      this.window = { id, pages: this.read(id * pageSize, Math.min(WINDOW_PAGES, pgid - id) * pageSize) };
    }
    const first = this.windowHolds(id, 1) ? this.fromWindow(id, 1) : this.read(id * pageSize, pageSize);
    const overflow = first.readUInt32LE(12);
    this.next = id + overflow + 1;
    if (overflow === 0) return first;
    const count = overflow + 1;
    return this.windowHolds(id, count) ? this.fromWindow(id, count) : this.read(id * pageSize, count * pageSize);
  }

  private windowHolds(id: number, count: number): boolean {
    const at = (id - this.window.id) * this.meta.pageSize;
    return at >= 0 && at + count * this.meta.pageSize <= this.window.pages.length;
  }

  private fromWindow(id: number, count: number): Buffer {
    const at = (id - this.window.id) * this.meta.pageSize;
    return this.window.pages.subarray(at, at + count * this.meta.pageSize);
  }

  /**
   * Pages `first` to `first + count - 1` in one read, into `into` (at least that long): for a reader that needs many
   * pages close together, where a read per page costs a disk seek each once the page cache cannot keep the db.
   */
  pagesInto(into: Buffer, first: number, count: number): Buffer {
    const { pageSize, pgid } = this.meta;
    if (first + count > pgid)
      throw new IntegrityError(`bbolt page ${first + count - 1} is past the end (${pgid} pages)`);
    const length = count * pageSize;
    const n = readSync(this.fd, into, 0, length, first * pageSize);
    if (n < length) throw new IntegrityError(`the db is truncated at byte ${first * pageSize + n}`);
    return into.subarray(0, length);
  }

  /** Every element of a bucket, in key order. */
  *elements(bucket: BucketValue): Generator<LeafElement> {
    for (const leaf of this.leaves(bucket)) yield* leafElements(leaf.page);
  }

  /**
   * The leaf pages of a bucket in key order, each with its page id (undefined for an inline bucket, whose one
   * leaf is the bucket's value): one page in memory at a time, plus the branch pages above it.
   */
  *leaves(bucket: BucketValue): Generator<{ id: number | undefined; page: Buffer }> {
    if (bucket.inline) {
      yield { id: undefined, page: bucket.inline };
      return;
    }
    const walk = function* (this: BboltReader, id: number): Generator<{ id: number; page: Buffer }> {
      const page = this.page(id);
      const flags = page.readUInt16LE(8);
      if (flags === LEAF_PAGE) yield { id, page };
      else if (flags === BRANCH_PAGE) for (const child of branchChildren(page)) yield* walk.call(this, child.pgid);
      else throw new IntegrityError(`bbolt page ${id} is neither a branch nor a leaf`);
    };
    yield* walk.call(this, bucket.root);
  }

  /** The last element of a bucket, by the rightmost path: a few page reads however large the bucket. */
  lastElement(bucket: BucketValue): LeafElement | undefined {
    if (bucket.inline) return leafElements(bucket.inline).at(-1);
    let page = this.page(bucket.root);
    for (let depth = 0; page.readUInt16LE(8) === BRANCH_PAGE && depth < 64; depth++) {
      const children = branchChildren(page);
      if (children.length === 0) return undefined;
      page = this.page(children[children.length - 1].pgid);
    }
    if (page.readUInt16LE(8) !== LEAF_PAGE) throw new IntegrityError('a bbolt bucket does not end in a leaf page');
    return leafElements(page).at(-1);
  }

  /**
   * The leaf pages of a (non-inline) bucket in key order, each with a key no greater than its first, read
   * from the branch pages above them: leaves themselves are not read, unless the root is one.
   */
  leafRefs(root: number): PageRefList {
    const refs = new PageRefList();
    const walk = (id: number, key: Buffer | undefined) => {
      const header = this.read(id * this.meta.pageSize, PAGE_HEADER);
      const flags = header.readUInt16LE(8);
      if (flags === LEAF_PAGE) {
        if (header.readUInt16LE(10) === 0) return;
        refs.push(key ?? leafElements(this.page(id))[0].key, id);
      } else if (flags === BRANCH_PAGE) {
        for (const child of branchChildren(this.page(id))) walk(child.pgid, child.key);
      } else {
        throw new IntegrityError(`bbolt page ${id} is neither a branch nor a leaf`);
      }
    };
    walk(root, undefined);
    return refs;
  }

  private read(position: number, length: number): Buffer {
    const buf = Buffer.allocUnsafe(length);
    const n = readSync(this.fd, buf, 0, length, position);
    if (n < Math.min(length, PAGE_HEADER)) throw new IntegrityError(`the db is truncated at byte ${position + n}`);
    return n === length ? buf : buf.subarray(0, n);
  }
}

/** The children of a branch page, in element order. */
export function branchChildren(page: Buffer): PageRef[] {
  const count = page.readUInt16LE(10);
  const out: PageRef[] = [];
  for (let i = 0; i < count; i++) {
    const at = PAGE_HEADER + i * ELEMENT;
    const keyAt = at + page.readUInt32LE(at);
    out.push({
      key: page.subarray(keyAt, keyAt + page.readUInt32LE(at + 4)),
      pgid: Number(page.readBigUInt64LE(at + 8)),
    });
  }
  return out;
}
