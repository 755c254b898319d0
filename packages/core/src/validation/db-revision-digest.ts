import { closeSync, openSync } from 'node:fs';
import { revisionDigest } from '../backup/revision-digest.js';
import { BboltReader, leafElements } from '../bbolt/bbolt-file.js';
import { isTombstoneKey, mainRevision, revisionKey } from '../bbolt/revision-key.js';
import { readFields } from '../common/protobuf-wire.js';
import type { DeltaEvent } from '../format/delta-format.js';

/**
 * The digest of a revision (revisionDigest) as a db file holds it: the `key` bucket's rows of that revision, read
 * as the events etcd's watch gives for them. Undefined when the db holds no row of it (compacted away, or past
 * its revision). A few page reads: the leaf is found through the branch pages above it.
 */
export function dbRevisionDigest(dbFile: string, revision: number): string | undefined {
  const fd = openSync(dbFile, 'r');
  try {
    const reader = new BboltReader(fd);
    const bucket = reader.buckets().get('key');
    if (!bucket) return undefined;
    const events: DeltaEvent[] = [];
    const first = revisionKey(revision, 0, false);
    const take = (elements: Iterable<{ key: Buffer; value: Buffer }>): boolean => {
      for (const { key, value } of elements) {
        const main = mainRevision(key);
        if (main < revision) continue;
        if (main > revision) return false;
        events.push(rowEvent(key, value, revision));
      }
      return true;
    };
    if (bucket.inline) {
      take(leafElements(bucket.inline));
    } else {
      const leaves = reader.leafRefs(bucket.root);
      // The last leaf whose first key is at or below the revision's first row, then on while rows of it go on.
      let i = 0;
      for (let lo = 0, hi = leaves.length - 1; lo <= hi; ) {
        const mid = (lo + hi) >> 1;
        if (Buffer.compare(leaves.key(mid), first) <= 0) {
          i = mid;
          lo = mid + 1;
        } else {
          hi = mid - 1;
        }
      }
      while (i < leaves.length && take(leafElements(reader.page(leaves.pgid(i))))) i++;
    }
    return events.length > 0 ? revisionDigest(events) : undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * A `key` bucket row as the watch event etcd sends for it: a put's KeyValue as stored; a tombstone stores the key
 * alone, and its event carries the deletion's revision.
 */
export function rowEvent(key: Buffer, value: Buffer, revision: number): DeltaEvent {
  const event: DeltaEvent = {
    type: isTombstoneKey(key) ? 'delete' : 'put',
    key: Buffer.alloc(0),
    value: Buffer.alloc(0),
    createRevision: 0,
    modRevision: revision,
    version: 0,
    lease: '0',
    time: '',
  };
  for (const f of readFields(value)) {
    if (f.field === 1 && f.bytes) event.key = f.bytes;
    else if (event.type === 'delete') continue;
    else if (f.field === 2) event.createRevision = Number(f.varint);
    else if (f.field === 4) event.version = Number(f.varint);
    else if (f.field === 5 && f.bytes) event.value = f.bytes;
    else if (f.field === 6) event.lease = String(BigInt.asIntN(64, f.varint ?? 0n));
  }
  return event;
}
