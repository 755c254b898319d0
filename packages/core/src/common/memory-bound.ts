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

/** Collects the young generation every `bytes` counted. */
function collectEvery(bytes: number): (size: number) => void {
  let since = 0;
  return (size) => {
    since += size;
    if (since >= bytes) {
      since = 0;
      collect({ type: 'minor' });
    }
  };
}

/**
 * Takes a stream's chunks as they arrive and collects the young generation every `bytes` of the buffers they were
 * cut from, each counted once. Node reads a socket into a fresh 64 KiB buffer each time, and every chunk cut from it
 * (an HTTP/2 DATA frame) keeps all of it alive: where reads come ~10 KB at a time, as etcd's snapshot and watch
 * streams do here, that is six times the bytes that arrive, which a count of the bytes does not see.
 */
export function youngCollections(bytes: number): (chunk: Buffer) => void {
  const add = collectEvery(bytes);
  let last: ArrayBufferLike | undefined;
  return (chunk) => {
    if (chunk.buffer === last) return;
    last = chunk.buffer;
    add(chunk.buffer.byteLength);
  };
}

/**
 * One count for every stream stage of the process: a restore fetches ten deltas at once and a copy ten objects,
 * and ten counts of their own collected every ~0.4 MiB between them. Each collection moves the chunks still in
 * flight to the old generation, where only a full collection frees them: a restore's main thread made 30 of those
 * (~0.3 s, and V8's concurrent marking beside it) where it now makes 2, and took 13% less CPU (docs/performance.md).
 */
const STREAM_BYTES = collectEvery(4 << 20);

/** A pass-through stage that collects the young generation every 4 MiB that flow through any such stage. */
export function boundedMemory(): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      STREAM_BYTES(chunk.length);
      done(null, chunk);
    },
  });
}
