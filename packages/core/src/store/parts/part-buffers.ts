import { collectGarbage } from '../../common/memory-bound.js';

/*
 * Part buffers used again. A part of an upload lives until it is sent (seconds), so it outlives the young generation
 * and only a full collection frees it: with a fresh buffer for every part, a copy of many objects spent a third of
 * its CPU collecting them (memory-bound.ts) and more joining chunks into them. Parts are filled into buffers of
 * their size taken from here and given back once sent, so no part becomes garbage while uploads go on; once the
 * last upload of that part size has ended, its free buffers are let go (one full collection frees them).
 */
const pools = new Map<number, { free: Buffer[]; users: number }>();

/** The part buffers of one upload: `take` one of `size` bytes, `give` it back once sent, `end` once (after all). */
export interface PartBuffers {
  take(): Buffer;
  give(buffer: Buffer): void;
  end(): void;
}

export function partBuffers(size: number): PartBuffers {
  let pool = pools.get(size);
  if (!pool) {
    pool = { free: [], users: 0 };
    pools.set(size, pool);
  }
  const own = pool;
  own.users++;
  let ended = false;
  return {
    take: () => own.free.pop() ?? Buffer.allocUnsafeSlow(size),
    give(buffer) {
      // a view of a part (its last, shorter one) gives back the buffer under it
      if (buffer.byteOffset === 0 && buffer.buffer.byteLength === size)
        own.free.push(Buffer.from(buffer.buffer, 0, size));
    },
    end() {
      if (ended) return;
      ended = true;
      if (--own.users > 0) return;
      pools.delete(size);
      if (own.free.length > 0) collectGarbage('major');
    },
  };
}

/** How many free part buffers are kept now, for tests. */
export function freePartBuffers(): number {
  let count = 0;
  for (const pool of pools.values()) count += pool.free.length;
  return count;
}
