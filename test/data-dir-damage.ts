import { closeSync, openSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { BboltReader } from '@etcd-steward/core';

/** Flips the bits of `mask` in the byte at `position`: damage as a bad disk or a stray write leaves it. */
export async function xorByte(file: string, position: number, mask = 0xff): Promise<void> {
  const handle = await open(file, 'r+');
  try {
    const byte = Buffer.alloc(1);
    await handle.read(byte, 0, 1, position);
    byte[0] ^= mask;
    await handle.write(byte, 0, 1, position);
  } finally {
    await handle.close();
  }
}

/**
 * Flips the top byte of the first key in the `key` bucket's leftmost leaf: the leaf's keys fall out of order,
 * which only a walk of the whole tree (full mode) finds; bbolt still opens the db.
 */
export async function damageKeyLeaf(db: string): Promise<void> {
  const fd = openSync(db, 'r');
  let leafStart: number;
  try {
    const reader = new BboltReader(fd);
    const key = reader.buckets().get('key');
    if (!key || key.root === 0) throw new Error('the key bucket should span pages');
    leafStart = reader.leafRefs(key.root).pgid(0) * reader.meta.pageSize;
  } finally {
    closeSync(fd);
  }
  const handle = await open(db, 'r');
  const header = Buffer.alloc(24);
  try {
    await handle.read(header, 0, 24, leafStart);
  } finally {
    await handle.close();
  }
  // The page header is 16 bytes; the first leaf element's key offset (from the element) is at 4 into it.
  await xorByte(db, leafStart + 16 + header.readUInt32LE(16 + 4));
}
