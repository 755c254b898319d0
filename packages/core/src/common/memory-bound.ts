import { Transform } from 'node:stream';
import v8 from 'node:v8';
import vm from 'node:vm';

/*
 * Streaming a large file through Node allocates a fresh Buffer for every network chunk and every
 * compressed block. They die young, but V8 only collects them once ~64 MB of dead external memory has
 * piled up, which alone would break our memory budget (150 MB for a snapshot of any size). A young-
 * generation collection every few MB costs ~1 ms and keeps the peak flat (scripts/bench/snapshot-save.ts).
 */
v8.setFlagsFromString('--expose-gc');
const collect = vm.runInNewContext('gc') as (options: { type: 'minor' | 'major' }) => void;

/**
 * Pages of a db read between forced young-generation collections by a pass over its pages (the full check, the
 * keyspace's rows): each read is a fresh buffer, dead once its page is looked at, and V8 counts such buffers
 * only loosely. Every 256 pages (1 MiB) the collections took a sixth of etcd-restore's verification; every 1024
 * (4 MiB) they cost a third of that, for 3 MB more at the peak (docs/performance.md).
 */
export const PAGES_PER_COLLECTION = 1024;

/** Collects garbage now: the young generation, or the whole heap. */
export function collectGarbage(type: 'minor' | 'major'): void {
  collect({ type });
}

/*
 * A collection that follows the dead parts. A part of an upload (MiBs, alive until it is sent) outlives the young
 * generation, so only a full collection frees it, and V8 left alone lets dead parts reach ~64 MB before it collects.
 * A full collection costs in proportion to the live heap, not to the garbage it frees; so one after every part of
 * every upload, with N uploads at once (a copy of many objects), collects N times as often over a heap N times as
 * large: a third of such a copy's CPU went to it. Instead the bytes released by all uploads are counted together,
 * and a full collection comes once they reach the part memory of the uploads in flight (the sum of their part
 * sizes): one upload collects after every part, as before, which holds its peak; N uploads collect once per N
 * parts, as much dead memory beside their live parts as one upload has beside its own, at a constant CPU per byte.
 */
let deadBytes = 0;
let partMemory = 0;

/**
 * Bytes just made garbage that only a full collection frees (a part sent, a delta written): one comes once the bytes
 * released since the last reach the part memory of the uploads in flight, at once when none is in flight. (V8's own
 * full collections free them too, but counting from those, seen through a 'gc' PerformanceObserver, saved nothing
 * measurable in a copy of many objects.)
 */
export function garbageReleased(bytes: number): void {
  deadBytes += bytes;
  if (deadBytes < partMemory) return;
  deadBytes = 0;
  collect({ type: 'major' });
}

/**
 * An upload in parts of about `partSize` bytes begins: its parts count toward the dead memory tolerated until it
 * ends (`end`, once). `sent(bytes)` after each part sent, which is garbage now.
 */
export function uploadInParts(partSize: number): { sent(bytes: number): void; end(): void } {
  partMemory += partSize;
  let ended = false;
  return {
    sent: garbageReleased,
    end() {
      if (ended) return;
      ended = true;
      partMemory -= partSize;
    },
  };
}

/** A pass-through stage that collects the young generation every `bytes` that flow through it. */
export function boundedMemory(bytes = 4 << 20): Transform {
  let since = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      since += chunk.length;
      if (since >= bytes) {
        since = 0;
        collect({ type: 'minor' });
      }
      done(null, chunk);
    },
  });
}
