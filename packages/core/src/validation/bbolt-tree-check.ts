import {
  type BboltReader,
  BRANCH_PAGE,
  BUCKET_LEAF_FLAG,
  branchChildren,
  bucketValue,
  ELEMENT,
  LEAF_PAGE,
  leafElements,
  NO_FREELIST,
  PAGE_HEADER,
} from '../bbolt/bbolt-file.js';
import { isTombstoneKey } from '../bbolt/revision-key.js';
import { IntegrityError } from '../common/errors.js';
import { collectGarbage, PAGES_PER_COLLECTION } from '../common/memory-bound.js';

const FREELIST_PAGE = 0x10;
/** bbolt trees are a few levels deep; anything deeper is a cycle through damaged page ids. */
const MAX_DEPTH = 64;

/**
 * bbolt's tx.Check, page by page (docs/etcd-formats.md §2.6): every page reachable from the root at most once
 * and below the high-water mark, each page's id and type right, elements inside their page, keys strictly
 * increasing and within their branch's bounds, sub-buckets followed; a stored freelist disjoint from the tree
 * and, with it, every page accounted for. Rows of etcd's `key` bucket must be revisions (docs/etcd-formats.md §3.2). Reads one
 * page at a time (plus the pages above it); a byte a page records which pages were reached.
 * Returns the number of pages walked; the first fault throws, naming the page. `onLeaf` is given each checked
 * leaf of a top-level bucket (an inline bucket's page without an id), in key order: for a caller that reads
 * the rows too, so that the db is read once.
 */
export function checkBboltTree(reader: BboltReader, onLeaf?: LeafVisitor): number {
  const { pgid, root, freelist, pageSize } = reader.meta;
  const reached = new Uint8Array(pgid);
  reached[0] = 1;
  reached[1] = 1;
  let walked = 0;
  let read = 0;
  const fault = (id: number, what: string) => new IntegrityError(`bbolt page ${id}: ${what}`);

  const claim = (id: number, parent: string): Buffer => {
    if (id < 2 || id >= pgid) throw fault(id, `${parent} points to it, outside the pages in use (2 to ${pgid - 1})`);
    const page = reader.page(id);
    if (++read % PAGES_PER_COLLECTION === 0) collectGarbage('minor');
    const overflow = page.readUInt32LE(12);
    if (page.readBigUInt64LE(0) !== BigInt(id)) throw fault(id, `its header says page ${page.readBigUInt64LE(0)}`);
    if (id + overflow >= pgid) throw fault(id, `its ${overflow} overflow pages run past the high-water mark`);
    if (page.length < (overflow + 1) * pageSize) throw fault(id, 'the file ends inside it');
    for (let p = id; p <= id + overflow; p++) {
      if (reached[p]) throw fault(p, `reached twice (again from ${parent})`);
      reached[p] = 1;
    }
    walked += overflow + 1;
    return page;
  };

  const visit = (id: number, lower: Buffer | undefined, upper: Buffer | undefined, bucket: Bucket, depth: number) => {
    if (depth > MAX_DEPTH) throw fault(id, `more than ${MAX_DEPTH} levels deep (a cycle)`);
    const page = claim(id, bucket.name);
    const flags = page.readUInt16LE(8);
    if (flags === LEAF_PAGE) {
      checkLeaf(page, id, lower, upper, bucket, depth);
      if (bucket.name !== 'root') onLeaf?.(bucket.name, id, page);
    } else if (flags === BRANCH_PAGE) {
      checkElementBounds(page, id, false);
      const children = branchChildren(page);
      if (children.length === 0) throw fault(id, 'an empty branch page');
      children.forEach((child, i) => {
        const next = children[i + 1]?.key ?? upper;
        checkKey(child.key, i === 0 ? lower : children[i - 1].key, i === 0, lower, upper, id);
        visit(child.pgid, child.key, next, bucket, depth + 1);
      });
    } else {
      throw fault(id, `type 0x${flags.toString(16)} where a branch or leaf page must be`);
    }
  };

  const checkLeaf = (
    page: Buffer,
    id: number,
    lower: Buffer | undefined,
    upper: Buffer | undefined,
    bucket: Bucket,
    depth: number,
  ) => {
    checkElementBounds(page, id, true);
    let previous: Buffer | undefined;
    for (const e of leafElements(page)) {
      checkKey(e.key, previous ?? lower, previous === undefined, lower, upper, id);
      previous = e.key;
      if ((e.flags & BUCKET_LEAF_FLAG) !== 0) {
        const child = bucketValue(e.value);
        const name = e.key.toString('latin1');
        const sub: Bucket = { name, revisionKeys: bucket.name === 'root' && name === 'key' };
        if (child.inline) checkInline(child.inline, id, sub);
        else visit(child.root, undefined, undefined, sub, depth + 1);
      } else if (bucket.revisionKeys) {
        checkRevisionKey(e.key, id);
      }
    }
  };

  const checkInline = (inline: Buffer, id: number, bucket: Bucket) => {
    if (inline.length < PAGE_HEADER) throw fault(id, `bucket "${bucket.name}" has a short inline page`);
    checkElementBounds(inline, id, true);
    let previous: Buffer | undefined;
    for (const e of leafElements(inline)) {
      if ((e.flags & BUCKET_LEAF_FLAG) !== 0) throw fault(id, `inline bucket "${bucket.name}" holds a sub-bucket`);
      checkKey(e.key, previous, previous === undefined, undefined, undefined, id);
      previous = e.key;
      if (bucket.revisionKeys) checkRevisionKey(e.key, id);
    }
    onLeaf?.(bucket.name, undefined, inline);
  };

  /** Every element and the bytes it points to lie inside the page (pos counts from the element, docs/etcd-formats.md §2.3). */
  const checkElementBounds = (page: Buffer, id: number, leaf: boolean) => {
    const count = page.readUInt16LE(10);
    if (PAGE_HEADER + count * ELEMENT > page.length) throw fault(id, `${count} elements do not fit in the page`);
    for (let i = 0; i < count; i++) {
      const at = PAGE_HEADER + i * ELEMENT;
      const pos = page.readUInt32LE(at + (leaf ? 4 : 0));
      const size = page.readUInt32LE(at + (leaf ? 8 : 4)) + (leaf ? page.readUInt32LE(at + 12) : 0);
      if (at + pos + size > page.length) throw fault(id, `element ${i} points past the end of the page`);
    }
  };

  const checkKey = (
    key: Buffer,
    floor: Buffer | undefined,
    inclusive: boolean,
    lower: Buffer | undefined,
    upper: Buffer | undefined,
    id: number,
  ) => {
    if (key.length === 0) throw fault(id, 'an empty key');
    if (floor && (inclusive ? Buffer.compare(key, floor) < 0 : Buffer.compare(key, floor) <= 0)) {
      throw fault(id, 'keys out of order');
    }
    if (lower && Buffer.compare(key, lower) < 0) throw fault(id, 'a key below its branch key');
    if (upper && Buffer.compare(key, upper) >= 0) throw fault(id, "a key at or above the next branch's key");
  };

  const checkRevisionKey = (key: Buffer, id: number) => {
    const ok = (key.length === 17 || isTombstoneKey(key)) && key[8] === 0x5f;
    if (!ok) throw fault(id, `a row of the "key" bucket whose key ${key.toString('hex')} is not a revision`);
  };

  if (freelist !== NO_FREELIST) claim(Number(freelist), 'the meta page');
  visit(root, undefined, undefined, { name: 'root', revisionKeys: false }, 0);
  if (freelist !== NO_FREELIST) checkFreelist(reader, Number(freelist), reached);
  return walked;
}

/** A checked leaf page of bucket `bucket` (no id: an inline bucket's page). */
export type LeafVisitor = (bucket: string, id: number | undefined, page: Buffer) => void;

interface Bucket {
  name: string;
  /** etcd's `key` bucket: every row's key is a revision. */
  revisionKeys: boolean;
}

/**
 * A stored freelist (etcd on Linux stores none, docs/etcd-formats.md §2.5): its ids unique, none reachable, and together with the
 * tree every page in use accounted for.
 */
function checkFreelist(reader: BboltReader, id: number, reached: Uint8Array): void {
  const page = reader.page(id);
  if (page.readUInt16LE(8) !== FREELIST_PAGE) throw new IntegrityError(`bbolt page ${id}: the freelist is not one`);
  let count = page.readUInt16LE(10);
  let at = PAGE_HEADER;
  if (count === 0xffff) {
    count = Number(page.readBigUInt64LE(at));
    at += 8;
  }
  if (at + count * 8 > page.length) throw new IntegrityError(`bbolt page ${id}: the freelist runs past its pages`);
  for (let i = 0; i < count; i++) {
    const free = Number(page.readBigUInt64LE(at + i * 8));
    if (free >= reached.length || reached[free]) {
      throw new IntegrityError(
        `bbolt page ${free} is listed twice in the freelist, or free and in use, or past the end`,
      );
    }
    reached[free] = 1;
  }
  const lost = reached.indexOf(0);
  if (lost >= 0) throw new IntegrityError(`bbolt page ${lost} is neither reachable nor free`);
}
