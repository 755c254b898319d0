import { closeSync, openSync } from 'node:fs';
import { BboltReader, leafElements } from '../bbolt/bbolt-file.js';
import { storeRevision } from '../bbolt/db-file-revision.js';
import { isTombstoneKey, mainRevision } from '../bbolt/revision-key.js';
import { IntegrityError } from '../common/errors.js';
import { collectGarbage, PAGES_PER_COLLECTION } from '../common/memory-bound.js';
import { FingerprintHash, type KeyspaceFingerprint } from '../etcd/keyspace-fingerprint.js';
import { keyValue, LiveRowDigests } from './live-row-digests.js';
import { NewestRows } from './newest-rows.js';

export interface DbKeyspace {
  /** The keyspace at the db's revision, fingerprinted as etcd would serve it (etcd/keyspace-fingerprint.ts). */
  fingerprint: KeyspaceFingerprint;
  /** Live keys at `earlierRevision`, when asked. */
  keysAtEarlier?: number;
}

/** The Map of keys held before a sorted run goes to disk: ~250k keys of Kubernetes' length. */
const MEMORY_BUDGET = 32 << 20;

/**
 * The keyspace an etcd db holds, read from the file without etcd (docs/etcd-formats.md §3.2): the `key`
 * bucket's rows, in revision order, give each key its newest row — a put (an mvccpb.KeyValue) or a tombstone —
 * and the live keys, in key order, are fingerprinted exactly as `keyspaceFingerprint` fingerprints what etcd
 * serves at the db's revision, their rows' pages read again in batches sorted by page (LiveRowDigests). The key
 * index is bounded (NewestRows), so memory does not grow with the db. `tmpDir` takes the index's sorted runs when
 * it outgrows `memoryBudget`.
 */
export function dbKeyspace(path: string, options: KeyspaceOptions): DbKeyspace {
  const keyspace = new KeyspaceReader(options);
  try {
    const fd = openSync(path, 'r');
    try {
      const reader = new BboltReader(fd);
      const keyBucket = reader.buckets().get('key');
      if (!keyBucket) throw new IntegrityError('the db has no "key" bucket: it is not an etcd database');
      for (const leaf of reader.leaves(keyBucket)) keyspace.addLeaf('key', leaf.id, leaf.page);
    } finally {
      closeSync(fd);
    }
    return keyspace.finish(path);
  } finally {
    keyspace.close();
  }
}

export interface KeyspaceOptions {
  tmpDir: string;
  earlierRevision?: number;
  memoryBudget?: number;
  /** Live rows whose pages are read at a time (LiveRowDigests); tests make it small. */
  digestBatch?: number;
}

/**
 * dbKeyspace in two steps, for a caller that reads the `key` bucket's leaves anyway (etcd-validate's full
 * check: checkBboltTree's `onLeaf`): each leaf is given to `addLeaf` in key order, then `finish` reads the
 * live keys' pages again. Saves one read of the db, which counts under a memory limit smaller than the db, where
 * the page cache cannot keep it.
 */
export class KeyspaceReader {
  private readonly rows: NewestRows;
  private readonly earlier: number;
  private pages = 0;
  private inline?: Buffer;

  constructor(private readonly options: KeyspaceOptions) {
    this.rows = new NewestRows({ tmpDir: options.tmpDir, memoryBudget: options.memoryBudget ?? MEMORY_BUDGET });
    this.earlier = options.earlierRevision ?? 0;
  }

  /** One leaf page of a bucket (no id: the `key` bucket is inline); leaves of other buckets are ignored. */
  addLeaf(bucket: string, id: number | undefined, page: Buffer): void {
    if (bucket !== 'key') return;
    if (id === undefined) this.inline = page;
    leafElements(page).forEach((row, element) => {
      // an empty row is the placeholder a revision-bumping restore leaves for a pending compaction
      // (docs/etcd-formats.md §4.2): not a key
      if (row.value.length === 0) return;
      const main = mainRevision(row.key);
      const tombstone = isTombstoneKey(row.key);
      this.rows.add(userKey(row.value, id, element), { page: id, element }, tombstone, main <= this.earlier);
    });
    if (++this.pages % PAGES_PER_COLLECTION === 0) collectGarbage('minor');
  }

  /** The keyspace of the db at `path`, whose `key` bucket's leaves were all added. */
  finish(path: string): DbKeyspace {
    const fd = openSync(path, 'r');
    try {
      const reader = new BboltReader(fd);
      const revision = storeRevision(reader);
      const hash = new FingerprintHash();
      const digests = new LiveRowDigests(
        reader,
        this.inline,
        (batch) => hash.addDigests(batch),
        this.options.digestBatch,
      );
      let keysAtEarlier = 0;
      for (const row of this.rows.inKeyOrder()) {
        if (row.liveAtEarlier) keysAtEarlier++;
        if (!row.tombstone) digests.add(row.page, row.element);
      }
      digests.flush();
      return {
        fingerprint: hash.digest(revision),
        ...(this.options.earlierRevision === undefined ? {} : { keysAtEarlier }),
      };
    } finally {
      closeSync(fd);
    }
  }

  close(): void {
    this.rows.close();
  }
}

/** The user key of a `key` bucket row (mvccpb.KeyValue field 1, which a tombstone's row holds too). */
export function userKey(value: Buffer, page: number | undefined, element: number): Buffer {
  return keyValue(value, page, element).key;
}
