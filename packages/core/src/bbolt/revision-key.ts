/*
 * The keys of etcd's `key` bucket (docs/etcd-formats.md §3.2): a revision, so that the bucket's order is the
 * order of the history.
 */

/**
 * `key` bucket key: 8-byte big-endian main revision, '_', 8-byte sub, and 't' for a tombstone. Every byte is
 * written, so it is cut from Node's pool: a replay makes one per event, and `Buffer.alloc` gave each an
 * ArrayBuffer of its own.
 */
export function revisionKey(main: number, sub: number, tombstone: boolean): Buffer {
  const key = Buffer.allocUnsafe(tombstone ? 18 : 17);
  writeUint64BE(key, main, 0);
  key[8] = 0x5f;
  writeUint64BE(key, sub, 9);
  if (tombstone) key[17] = 0x74;
  return key;
}

/** The main revision a `key` bucket key holds. */
export function mainRevision(key: Buffer): number {
  return Number(key.readBigUInt64BE(0));
}

/** Whether a `key` bucket key (revisionKey) marks a deletion. */
export function isTombstoneKey(key: Buffer): boolean {
  return key.length === 18 && key[17] === 0x74;
}

function writeUint64BE(buf: Buffer, value: number, at: number): void {
  buf.writeUInt32BE(Math.floor(value / 2 ** 32), at);
  buf.writeUInt32BE(value % 2 ** 32, at + 4);
}
