import { writeMessage } from '../common/protobuf-wire.js';
import type { DeltaEvent } from '../format/delta-format.js';

/*
 * The rows etcd's mvcc writes into bbolt, byte for byte as etcd writes them (docs/etcd-formats.md §3.2), so that
 * range reads and HashKV cannot tell a row written here from one etcd wrote: proto3 with zero fields left
 * out and fields in ascending order, as gogo marshals them.
 */

/**
 * The stored `mvccpb.KeyValue` for an event. A put's watch event carries the very KeyValue etcd stored; a
 * delete's carries a mod_revision etcd added after storing, and the tombstone itself is the key alone.
 */
export function eventRecord(e: DeltaEvent): Buffer {
  if (e.type === 'delete') return writeMessage([[1, e.key]]);
  const lease = e.lease !== '0' && e.lease !== '' ? BigInt(e.lease) : 0n;
  return writeMessage([
    [1, e.key],
    [2, e.createRevision],
    [3, e.modRevision],
    [4, e.version],
    [5, e.value],
    [6, lease],
  ]);
}

/** A `lease` bucket row as etcd's lessor writes it on grant: key the 8-byte big-endian ID, value leasepb.Lease{ID, TTL}. */
export function leaseRecord(id: bigint, ttl: number): { key: Buffer; value: Buffer } {
  const key = Buffer.alloc(8);
  key.writeBigInt64BE(id);
  return {
    key,
    value: writeMessage([
      [1, id],
      [2, ttl],
    ]),
  };
}
