import { Transform } from 'node:stream';

/**
 * Joins small chunks into chunks of at least `size` bytes. etcd streams snapshots in 32 KiB messages, and
 * every async compression call and pipeline stage costs per chunk. 128 KiB gets most of the gain; larger
 * chunks live long enough to be promoted out of V8's young generation and raise peak memory
 * (scripts/bench/snapshot-save.ts, docs/performance.md).
 */
export function coalesce(size = 128 << 10): Transform {
  let parts: Buffer[] = [];
  let bytes = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      parts.push(chunk);
      bytes += chunk.length;
      if (bytes < size) return done();
      const out = parts.length === 1 ? parts[0] : Buffer.concat(parts, bytes);
      parts = [];
      bytes = 0;
      done(null, out);
    },
    flush(done) {
      if (bytes > 0) this.push(parts.length === 1 ? parts[0] : Buffer.concat(parts, bytes));
      done();
    },
  });
}
