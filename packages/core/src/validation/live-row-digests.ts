import { type BboltReader, leafElements } from '../bbolt/bbolt-file.js';
import { IntegrityError } from '../common/errors.js';
import { collectGarbage, PAGES_PER_COLLECTION } from '../common/memory-bound.js';
import { ProtoCursor } from '../common/protobuf-wire.js';
import { type FingerprintedKey, KEY_DIGEST_BYTES, writeKeyDigest } from '../etcd/keyspace-fingerprint.js';

/** Live rows taken before their pages are read: a batch's places, order and digests take ~5.5 MB. */
export const DIGEST_BATCH = 1 << 17;
/** One read covers needed pages this close together, and the ones between them... */
const MAX_GAP_PAGES = 8;
/** ...up to this many bytes. */
const SPAN_BYTES = 256 << 10;
/**
 * Rows taken between young-generation collections. Each row leaves short-lived objects (its elements, fields,
 * digest text) at a rate that makes V8 grow the young generation to 32 MB if left alone; pages read are
 * collected every PAGES_PER_COLLECTION, as every pass over a db's pages does.
 */
const ROWS_PER_COLLECTION = 4096;
/** A row's place as one number: its page times this, plus its element (a page holds fewer than 2^16). */
const ELEMENTS = 65536;

/**
 * The digests (etcd/keyspace-fingerprint.ts, writeKeyDigest) of a db's live `key` bucket rows, given in key order and
 * handed on in key order, a batch at a time, but read in the order of the file: each batch is sorted by page, and its
 * pages are read in spans, one read for needed pages that lie close together. The rows of a key lie in revision
 * order, so key order is a random read per row; under a memory limit smaller than the db, where the page cache
 * cannot keep it, those reads went to the disk one page at a time: this pass took 1.8 s in a 256 MiB cgroup against
 * 0.7 s outside on a 339 MB db, and takes 0.7 s in both with spans (docs/performance.md).
 */
export class LiveRowDigests {
  private readonly places: Float64Array;
  private readonly order: Uint32Array;
  private readonly digests: Buffer;
  private readonly spanBuffer: Buffer;
  private count = 0;

  /**
   * @param inline the `key` bucket's one leaf when the bucket is inline (a tiny db): its rows have no page
   * @param onDigests takes the digests of the next rows in key order, one after another
   * @param batch rows taken before their pages are read
   */
  constructor(
    private readonly reader: BboltReader,
    private readonly inline: Buffer | undefined,
    private readonly onDigests: (digests: Buffer) => void,
    private readonly batch = DIGEST_BATCH,
  ) {
    this.places = new Float64Array(batch);
    this.order = new Uint32Array(batch);
    this.digests = Buffer.allocUnsafe(batch * KEY_DIGEST_BYTES);
    this.spanBuffer = Buffer.allocUnsafe(Math.max(SPAN_BYTES, reader.meta.pageSize));
  }

  /** The next live row in key order: element `element` of leaf page `page` (undefined: the inline leaf). */
  add(page: number | undefined, element: number): void {
    this.places[this.count++] = (page ?? 0) * ELEMENTS + element;
    if (this.count % ROWS_PER_COLLECTION === 0) collectGarbage('minor');
    if (this.count === this.batch) this.flush();
  }

  /** Hands on the digests of the rows added since the last flush. */
  flush(): void {
    const n = this.count;
    if (n === 0) return;
    const order = this.order.subarray(0, n);
    for (let i = 0; i < n; i++) order[i] = i;
    order.sort((a, b) => this.places[a] - this.places[b]);
    const pages = new PageSpans(this.reader, this.spanBuffer, this.inline);
    for (let k = 0; k < n; k++) {
      const i = order[k];
      const page = Math.floor(this.places[i] / ELEMENTS);
      const element = this.places[i] % ELEMENTS;
      const row = pages.elements(page, () => this.pagesAfter(order, k))[element];
      writeKeyDigest(keyValue(row.value, page || undefined, element), this.digests, i * KEY_DIGEST_BYTES);
    }
    this.count = 0;
    this.onDigests(this.digests.subarray(0, n * KEY_DIGEST_BYTES));
  }

  /** The pages the sorted rows from `k` on need, in order, each once. */
  private *pagesAfter(order: Uint32Array, k: number): Generator<number> {
    let last = -1;
    for (let j = k; j < order.length; j++) {
      const page = Math.floor(this.places[order[j]] / ELEMENTS);
      if (page === last) continue;
      last = page;
      yield page;
    }
  }
}

/** Leaf pages read in ascending order through spans: one read for the needed pages close together. */
class PageSpans {
  private first = 0;
  private end = 0;
  private span: Buffer = Buffer.alloc(0);
  private current = -1;
  private parsed = 0;
  private currentElements: ReturnType<typeof leafElements> = [];

  constructor(
    private readonly reader: BboltReader,
    private readonly buffer: Buffer,
    private readonly inline: Buffer | undefined,
  ) {}

  /** The elements of leaf page `page` (0: the inline leaf); `upcoming` lists the pages needed from it on. */
  elements(page: number, upcoming: () => Generator<number>): ReturnType<typeof leafElements> {
    if (page !== this.current) {
      this.current = page;
      if (++this.parsed % PAGES_PER_COLLECTION === 0) collectGarbage('minor');
      this.currentElements = leafElements(page === 0 ? (this.inline ?? Buffer.alloc(0)) : this.page(page, upcoming));
    }
    return this.currentElements;
  }

  private page(page: number, upcoming: () => Generator<number>): Buffer {
    const { pageSize } = this.reader.meta;
    if (page < this.first || page >= this.end) this.readSpan(page, upcoming, pageSize);
    const at = (page - this.first) * pageSize;
    const overflow = this.span.readUInt32LE(at + 12);
    // a page with overflow pages past the span is read on its own
    return page + overflow < this.end ? this.span.subarray(at, at + (overflow + 1) * pageSize) : this.reader.page(page);
  }

  private readSpan(page: number, upcoming: () => Generator<number>, pageSize: number): void {
    const limit = Math.floor(this.buffer.length / pageSize);
    let end = page + 1;
    for (const next of upcoming()) {
      if (next - (end - 1) > MAX_GAP_PAGES || next + 1 - page > limit) break;
      end = next + 1;
    }
    this.span = this.reader.pagesInto(this.buffer, page, end - page);
    this.first = page;
    this.end = end;
  }
}

/** An absent field's bytes, shared: a row is read for every key of the db. */
const EMPTY = Buffer.alloc(0);

/**
 * A `key` bucket row's mvccpb.KeyValue: key 1, create_revision 2, mod_revision 3, version 4, value 5 (lease 6 is
 * not fingerprinted); every row, a tombstone's too, holds a key.
 */
export function keyValue(value: Buffer, page: number | undefined, element: number): FingerprintedKey {
  const kv: FingerprintedKey = {
    key: EMPTY,
    value: EMPTY,
    createRevision: 0,
    modRevision: 0,
    version: 0,
  };
  try {
    for (const c = new ProtoCursor(value); c.next(); ) {
      if (c.field === 1 && c.wire === 2) kv.key = c.bytes();
      else if (c.field === 5 && c.wire === 2) kv.value = c.bytes();
      else if (c.field === 2 && c.wire === 0) kv.createRevision = c.value;
      else if (c.field === 3 && c.wire === 0) kv.modRevision = c.value;
      else if (c.field === 4 && c.wire === 0) kv.version = c.value;
    }
  } catch (err) {
    throw new IntegrityError(
      `the "key" bucket row ${element} on bbolt page ${page ?? 'inline'} is not a KeyValue: ${(err as Error).message}`,
    );
  }
  if (kv.key.length === 0) {
    throw new IntegrityError(`the "key" bucket row ${element} on bbolt page ${page ?? 'inline'} holds no key`);
  }
  return kv;
}
