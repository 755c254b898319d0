import { writeSync } from 'node:fs';
import { BRANCH_PAGE, ELEMENT, LEAF_PAGE, PAGE_HEADER } from './bbolt-file.js';
import { PageRefList } from './bbolt-page-refs.js';

/**
 * Appends pages to a bbolt file from page `firstPgid` on. Pages are laid out in one reused batch buffer and
 * written a batch at a time, so writing hundreds of megabytes allocates (almost) nothing.
 */
export class PageAppender {
  private readonly batch: Buffer;
  private used = 0;
  private written: number;
  nextPgid: number;

  constructor(
    private readonly fd: number,
    readonly pageSize: number,
    firstPgid: number,
    batchBytes = 1 << 20,
  ) {
    this.batch = Buffer.alloc(Math.max(batchBytes, pageSize));
    this.nextPgid = firstPgid;
    this.written = firstPgid * pageSize;
  }

  /** Lays out `pages` zeroed pages at the next page id, lets `fill` write them (header id included) and returns the id. */
  append(pages: number, fill: (page: Buffer) => void): number {
    const id = this.nextPgid;
    const bytes = pages * this.pageSize;
    if (this.used + bytes > this.batch.length) this.flush();
    // A node larger than the batch (a huge value on overflow pages) is written on its own.
    const page =
      bytes > this.batch.length ? Buffer.alloc(bytes) : this.batch.subarray(this.used, this.used + bytes).fill(0);
    page.writeBigUInt64LE(BigInt(id), 0);
    fill(page);
    if (page.buffer === this.batch.buffer) this.used += bytes;
    else this.writeAll(page);
    this.nextPgid += pages;
    return id;
  }

  flush(): void {
    this.writeAll(this.batch.subarray(0, this.used));
    this.used = 0;
  }

  private writeAll(bytes: Buffer): void {
    for (let off = 0; off < bytes.length; )
      off += writeSync(this.fd, bytes, off, bytes.length - off, this.written + off);
    this.written += bytes.length;
  }
}

/**
 * Packs key/value elements, given in key order, into leaf pages as full as they can be (bbolt splits them
 * again when it writes there). An element too big for one page gets a page of its own with overflow pages.
 * Each finished page is appended and recorded in `refs` with its first key, for the branches above.
 */
export class LeafBuilder {
  private elements: Array<{ flags: number; key: Buffer; value: Buffer }> = [];
  private size = PAGE_HEADER;

  constructor(
    private readonly pages: PageAppender,
    private refs = new PageRefList(),
  ) {}

  /** Puts `earlier`, the pages of keys below every key added here, ahead of the pages written so far. */
  putBefore(earlier: PageRefList): void {
    for (let i = 0; i < this.refs.length; i++) earlier.push(this.refs.key(i), this.refs.pgid(i));
    this.refs = earlier;
  }

  add(key: Buffer, value: Buffer, flags = 0): void {
    const grow = ELEMENT + key.length + value.length;
    if (this.elements.length > 0 && (this.size + grow > this.pages.pageSize || this.elements.length >= 0xfffe))
      this.flush();
    this.elements.push({ flags, key, value });
    this.size += grow;
  }

  /** Writes the last, partly filled page; `refs` is then complete. */
  finish(): PageRefList {
    this.flush();
    return this.refs;
  }

  private flush(): void {
    const elements = this.elements;
    if (elements.length === 0) return;
    const span = Math.ceil(this.size / this.pages.pageSize);
    const id = this.pages.append(span, (page) => {
      page.writeUInt16LE(LEAF_PAGE, 8);
      page.writeUInt16LE(elements.length, 10);
      page.writeUInt32LE(span - 1, 12);
      let data = PAGE_HEADER + elements.length * ELEMENT;
      elements.forEach((e, i) => {
        const at = PAGE_HEADER + i * ELEMENT;
        page.writeUInt32LE(e.flags, at);
        page.writeUInt32LE(data - at, at + 4);
        page.writeUInt32LE(e.key.length, at + 8);
        page.writeUInt32LE(e.value.length, at + 12);
        data += e.key.copy(page, data);
        data += e.value.copy(page, data);
      });
    });
    this.refs.push(elements[0].key, id);
    this.elements = [];
    this.size = PAGE_HEADER;
  }
}

/**
 * Builds the branch levels above `refs` (children in key order) and returns the root page: the only child
 * itself when there is one, else a fresh, empty leaf when there are none (an empty bucket).
 */
export function writeBranches(pages: PageAppender, refs: PageRefList): number {
  if (refs.length === 0) return pages.append(1, (page) => page.writeUInt16LE(LEAF_PAGE, 8));
  let level = refs;
  while (level.length > 1) {
    const children = level;
    const next = new PageRefList();
    let first = 0;
    let size = PAGE_HEADER;
    // Children [first, end) make one branch page.
    const flush = (end: number) => {
      const count = end - first;
      const span = Math.ceil(size / pages.pageSize);
      const id = pages.append(span, (page) => {
        page.writeUInt16LE(BRANCH_PAGE, 8);
        page.writeUInt16LE(count, 10);
        page.writeUInt32LE(span - 1, 12);
        let data = PAGE_HEADER + count * ELEMENT;
        for (let i = 0; i < count; i++) {
          const at = PAGE_HEADER + i * ELEMENT;
          const key = children.key(first + i);
          page.writeUInt32LE(data - at, at);
          page.writeUInt32LE(key.length, at + 4);
          page.writeBigUInt64LE(BigInt(children.pgid(first + i)), at + 8);
          data += key.copy(page, data);
        }
      });
      next.push(children.key(first), id);
      first = end;
      size = PAGE_HEADER;
    };
    for (let i = 0; i < children.length; i++) {
      const grow = ELEMENT + children.key(i).length;
      if (i - first >= 2 && size + grow > pages.pageSize) flush(i);
      size += grow;
    }
    flush(children.length);
    level = next;
  }
  return level.pgid(0);
}
