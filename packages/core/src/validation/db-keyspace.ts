import { closeSync, openSync } from 'node:fs';
import { BboltReader, leafElements } from '../bbolt/bbolt-file.js';
import { storeRevision } from '../bbolt/db-file-revision.js';
import { IntegrityError } from '../common/errors.js';
import { collectGarbage } from '../common/memory-bound.js';
import { ProtoCursor } from '../common/protobuf-wire.js';
import { type FingerprintedKey, FingerprintHash, type KeyspaceFingerprint } from '../etcd/keyspace-fingerprint.js';
import { NewestRows } from './newest-rows.js';

export interface DbKeyspace {
  /** The keyspace at the db's revision, fingerprinted as etcd would serve it (etcd/keyspace-fingerprint.ts). */
  fingerprint: KeyspaceFingerprint;
  /** Live keys at `earlierRevision`, when asked. */
  keysAtEarlier?: number;
}

/** The Map of keys held before a sorted run goes to disk: ~250k keys of Kubernetes' length. */
const MEMORY_BUDGET = 32 << 20;
/** Pages read between young-generation collections: each read is a fresh buffer, dead at once. */
const PAGES_PER_COLLECTION = 256;

/**
 * The keyspace an etcd db holds, read from the file without etcd (docs/etcd-formats.md §3.2): the `key`
 * bucket's rows, in revision order, give each key its newest row — a put (an mvccpb.KeyValue) or a tombstone —
 * and the live keys, in key order, are fingerprinted exactly as `keyspaceFingerprint` fingerprints what etcd
 * serves at the db's revision. Pages are read one at a time; the key index is bounded (NewestRows), so memory
 * does not grow with the db. `tmpDir` takes the index's sorted runs when it outgrows `memoryBudget`.
 */
export function dbKeyspace(
  path: string,
  options: { tmpDir: string; earlierRevision?: number; memoryBudget?: number },
): DbKeyspace {
  const fd = openSync(path, 'r');
  const rows = new NewestRows({ tmpDir: options.tmpDir, memoryBudget: options.memoryBudget ?? MEMORY_BUDGET });
  try {
    const reader = new BboltReader(fd);
    const revision = storeRevision(reader);
    const keyBucket = reader.buckets().get('key');
    if (!keyBucket) throw new IntegrityError('the db has no "key" bucket: it is not an etcd database');
    const earlier = options.earlierRevision ?? 0;
    let pages = 0;
    for (const leaf of reader.leaves(keyBucket)) {
      leafElements(leaf.page).forEach((row, element) => {
        // an empty row is the placeholder a revision-bumping restore leaves for a pending compaction
        // (docs/etcd-formats.md §4.2): not a key
        if (row.value.length === 0) return;
        const main = Number(row.key.readBigUInt64BE(0));
        const tombstone = row.key.length === 18 && row.key[17] === 0x74;
        rows.add(userKey(row.value, leaf.id, element), { page: leaf.id, element }, tombstone, main <= earlier);
      });
      if (++pages % PAGES_PER_COLLECTION === 0) collectGarbage('minor');
    }
    const hash = new FingerprintHash();
    let keysAtEarlier = 0;
    let cached: { id: number | undefined; page: Buffer } = { id: undefined, page: keyBucket.inline ?? Buffer.alloc(0) };
    for (const row of rows.inKeyOrder()) {
      if (row.liveAtEarlier) keysAtEarlier++;
      if (row.tombstone) continue;
      if (row.page !== cached.id) cached = { id: row.page, page: reader.page(row.page as number) };
      const element = leafElements(cached.page)[row.element];
      hash.add(keyValue(element.value, row.page, row.element));
      if (++pages % PAGES_PER_COLLECTION === 0) collectGarbage('minor');
    }
    return {
      fingerprint: hash.digest(revision),
      ...(options.earlierRevision === undefined ? {} : { keysAtEarlier }),
    };
  } finally {
    rows.close();
    closeSync(fd);
  }
}

/** The user key of a `key` bucket row (mvccpb.KeyValue field 1, which a tombstone's row holds too). */
export function userKey(value: Buffer, page: number | undefined, element: number): Buffer {
  const key = keyValue(value, page, element).key;
  if (key.length === 0) {
    throw new IntegrityError(`the "key" bucket row ${element} on bbolt page ${page ?? 'inline'} holds no key`);
  }
  return key;
}

/** mvccpb.KeyValue: key 1, create_revision 2, mod_revision 3, version 4, value 5 (lease 6 is not fingerprinted). */
function keyValue(value: Buffer, page: number | undefined, element: number): FingerprintedKey {
  const kv: FingerprintedKey = {
    key: Buffer.alloc(0),
    value: Buffer.alloc(0),
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
  return kv;
}
