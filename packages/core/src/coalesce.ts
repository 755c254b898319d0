import { Transform } from 'node:stream';

/**
 * Joins small chunks (a delta's events, say) into chunks of at least `size` bytes: every compression call
 * and pipeline stage costs per chunk. Measured on snapshots (etcd's 32 KiB messages, which
 * snapshot-stream.ts now joins as it reads them), 128 KiB got most of the gain; larger chunks live long
 * enough to be promoted out of V8's young generation and raise peak memory (docs/performance.md).
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
