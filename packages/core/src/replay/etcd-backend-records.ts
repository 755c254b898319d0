import type { DeltaEvent } from '../format/delta-format.js';

/*
 * The rows etcd's mvcc writes into bbolt, byte for byte as etcd writes them (docs/etcd-formats.md §3.2), so that
 * range reads and HashKV cannot tell a row written here from one etcd wrote: proto3 with zero fields left
 * out and fields in ascending order, as gogo marshals them.
 */

/** `key` bucket key: 8-byte big-endian main revision, '_', 8-byte sub, and 't' for a tombstone. */
export function revisionKey(main: number, sub: number, tombstone: boolean): Buffer {
  const key = Buffer.alloc(tombstone ? 18 : 17);
  writeUint64BE(key, main, 0);
  key[8] = 0x5f;
  writeUint64BE(key, sub, 9);
  if (tombstone) key[17] = 0x74;
  return key;
}

function writeUint64BE(buf: Buffer, value: number, at: number): void {
  buf.writeUInt32BE(Math.floor(value / 2 ** 32), at);
  buf.writeUInt32BE(value % 2 ** 32, at + 4);
}

/**
 * The stored `mvccpb.KeyValue` for an event. A put's watch event carries the very KeyValue etcd stored; a
 * delete's carries a mod_revision etcd added after storing, and the tombstone itself is the key alone.
 */
export function eventRecord(e: DeltaEvent): Buffer {
  if (e.type === 'delete') return proto([[1, e.key]]);
  const lease = e.lease !== '0' && e.lease !== '' ? BigInt(e.lease) : 0n;
  return proto([
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
    value: proto([
      [1, id],
      [2, ttl],
    ]),
  };
}

type Field = [number, Buffer | number | bigint];

/** Fields in order; zero numbers and empty bytes are left out. Sized first, then written into one buffer. */
function proto(fields: Field[]): Buffer {
  let size = 0;
  for (const [n, v] of fields) {
    if (Buffer.isBuffer(v)) size += v.length === 0 ? 0 : varintSize(n << 3) + varintSize(v.length) + v.length;
    else if (v !== 0 && v !== 0n) size += varintSize(n << 3) + varintSize(v);
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const [n, v] of fields) {
    if (Buffer.isBuffer(v)) {
      if (v.length === 0) continue;
      at = writeVarint(out, at, (n << 3) | 2);
      at = writeVarint(out, at, v.length);
      at += v.copy(out, at);
    } else if (v !== 0 && v !== 0n) {
      at = writeVarint(out, at, n << 3);
      at = writeVarint(out, at, v);
    }
  }
  return out;
}

/** Revisions and sizes are safe integers; lease IDs are int64 and come as bigints (never negative here). */
function varintSize(v: number | bigint): number {
  let n = 1;
  if (typeof v === 'bigint') {
    for (let x = BigInt.asUintN(64, v); x >= 0x80n; x >>= 7n) n++;
    return n;
  }
  for (let x = v; x >= 0x80; x = Math.floor(x / 0x80)) n++;
  return n;
}

function writeVarint(out: Buffer, at: number, v: number | bigint): number {
  if (typeof v === 'bigint') {
    let x = BigInt.asUintN(64, v);
    while (x >= 0x80n) {
      out[at++] = Number(x & 0x7fn) | 0x80;
      x >>= 7n;
    }
    out[at++] = Number(x);
    return at;
  }
  let x = v;
  while (x >= 0x80) {
    out[at++] = (x % 0x80) | 0x80;
    x = Math.floor(x / 0x80);
  }
  out[at++] = x;
  return at;
}
