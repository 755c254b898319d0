import { closeSync, openSync } from 'node:fs';
import { setImmediate as yieldToEvents } from 'node:timers/promises';
import { BboltReader, type LeafElement, leafElements } from '../bbolt/bbolt-file.js';
import { isTombstoneKey, mainRevision } from '../bbolt/revision-key.js';
import { IntegrityError } from '../common/errors.js';
import { collectGarbage, PAGES_PER_COLLECTION } from '../common/memory-bound.js';
import { ProtoCursor } from '../common/protobuf-wire.js';
import type { DeltaEvent } from '../format/delta-format.js';
import { NewestRows } from '../validation/newest-rows.js';
import { type KeyFilter, keyMatches } from './key-filter.js';

/**
 * A key as an etcd db holds it at a revision: its newest row there (mvccpb.KeyValue, docs/etcd-formats.md §3.2), with
 * an event's fields; `modRevision` is its last put's, or its deletion's.
 */
export type DbKey = Omit<DeltaEvent, 'type' | 'time'> & {
  /** The newest row is a tombstone: the key was deleted at `modRevision` and is not in the keyspace. */
  deleted: boolean;
};

export interface DbKeysOptions {
  /** Only rows at or below this revision count (a full snapshot may hold more than its name says, etcd#9037). */
  atOrBelow?: number;
  /** Also give the keys whose newest row is a deletion (a log shows them); the keyspace has them not. */
  deleted?: boolean;
  /** Where the key index spills its sorted runs when it outgrows its budget (NewestRows). */
  tmpDir: string;
  memoryBudget?: number;
  signal?: AbortSignal;
}

/** The pages whose elements are kept for the second pass: the rows of a key range often share pages. */
const PAGE_CACHE = 64;
/** Leaves read between turns of the event loop, so that SIGTERM is heard during a long scan. */
const LEAVES_PER_TURN = 256;

/**
 * The keys of an etcd db file that `filter` asks about, each with its newest row, in key order (bytewise, as etcd
 * serves a range), read from the file without etcd. The `key` bucket is in revision order, so a key's newest row
 * is known only once the bucket has been read: a first pass indexes the rows of the keys asked about (bounded:
 * NewestRows spills to `tmpDir`), a second reads those rows again in key order. Memory does not grow with the db.
 */
export async function* dbKeys(path: string, filter: KeyFilter, options: DbKeysOptions): AsyncGenerator<DbKey> {
  const rows = new NewestRows({ tmpDir: options.tmpDir, memoryBudget: options.memoryBudget ?? 32 << 20 });
  const fd = openSync(path, 'r');
  try {
    const reader = new BboltReader(fd);
    const bucket = reader.buckets().get('key');
    if (!bucket) throw new IntegrityError(`${path} has no "key" bucket: it is not an etcd database`);
    let inline: Buffer | undefined;
    let leaves = 0;
    scan: for (const leaf of reader.leaves(bucket)) {
      if (leaf.id === undefined) inline = leaf.page;
      const elements = leafElements(leaf.page);
      for (let element = 0; element < elements.length; element++) {
        const row = elements[element];
        // an empty row is the placeholder a revision-bumping restore leaves (docs/etcd-formats.md §4.2): no key
        if (row.value.length === 0) continue;
        // rows come in revision order: past the revision asked for, nothing more counts
        if (options.atOrBelow !== undefined && mainRevision(row.key) > options.atOrBelow) break scan;
        const key = rowKey(row.value, leaf.id, element);
        if (keyMatches(filter, key)) rows.add(key, { page: leaf.id, element }, isTombstoneKey(row.key), false);
      }
      if (++leaves % PAGES_PER_COLLECTION === 0) collectGarbage('minor');
      if (leaves % LEAVES_PER_TURN === 0) {
        await yieldToEvents();
        options.signal?.throwIfAborted();
      }
    }
    const pages = new LeafCache(reader, inline);
    let given = 0;
    for (const place of rows.inKeyOrder()) {
      if (place.tombstone && !options.deleted) continue;
      const row = pages.element(place.page, place.element);
      yield keyValue(row, place.page, place.element, place.tombstone);
      if (++given % LEAVES_PER_TURN === 0) options.signal?.throwIfAborted();
    }
  } finally {
    closeSync(fd);
    rows.close();
  }
}

/** Leaf pages by id, the last PAGE_CACHE of them kept. */
class LeafCache {
  private readonly pages = new Map<number, LeafElement[]>();
  private readonly inline?: LeafElement[];

  constructor(
    private readonly reader: BboltReader,
    inline: Buffer | undefined,
  ) {
    if (inline) this.inline = leafElements(inline);
  }

  element(page: number | undefined, element: number): LeafElement {
    let elements = page === undefined ? this.inline : this.pages.get(page);
    if (!elements && page !== undefined) {
      elements = leafElements(this.reader.page(page));
      if (this.pages.size >= PAGE_CACHE) this.pages.delete(this.pages.keys().next().value as number);
      this.pages.set(page, elements);
    }
    const row = elements?.[element];
    if (!row) throw new IntegrityError(`bbolt page ${page ?? 'inline'} has no row ${element} any more`);
    return row;
  }
}

/** The user key of a `key` bucket row: mvccpb.KeyValue's field 1, which comes first and a tombstone holds too. */
function rowKey(value: Buffer, page: number | undefined, element: number): Buffer {
  try {
    for (const c = new ProtoCursor(value); c.next(); ) if (c.field === 1 && c.wire === 2) return c.bytes();
  } catch (err) {
    throw rowError(page, element, (err as Error).message);
  }
  throw rowError(page, element, 'it holds no key');
}

/** mvccpb.KeyValue: key 1, create_revision 2, mod_revision 3, version 4, value 5, lease 6. */
function keyValue(row: LeafElement, page: number | undefined, element: number, tombstone: boolean): DbKey {
  const kv: DbKey = {
    key: Buffer.alloc(0),
    value: Buffer.alloc(0),
    createRevision: 0,
    // a tombstone's row holds the key alone (etcd's mvcc writes KeyValue{Key}): its revision is the row's
    modRevision: mainRevision(row.key),
    version: 0,
    lease: '0',
    deleted: tombstone,
  };
  try {
    for (const c = new ProtoCursor(row.value); c.next(); ) {
      if (c.field === 1 && c.wire === 2) kv.key = Buffer.from(c.bytes());
      else if (c.field === 5 && c.wire === 2) kv.value = Buffer.from(c.bytes());
      else if (c.field === 2 && c.wire === 0) kv.createRevision = c.value;
      else if (c.field === 3 && c.wire === 0) kv.modRevision = c.value;
      else if (c.field === 4 && c.wire === 0) kv.version = c.value;
      else if (c.field === 6 && c.wire === 0) kv.lease = BigInt.asIntN(64, c.bigint()).toString();
    }
  } catch (err) {
    throw rowError(page, element, (err as Error).message);
  }
  return kv;
}

function rowError(page: number | undefined, element: number, why: string): IntegrityError {
  return new IntegrityError(
    `the "key" bucket row ${element} on bbolt page ${page ?? 'inline'} is not a KeyValue: ${why}`,
  );
}
