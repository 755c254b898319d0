import { PassThrough, type Transform } from 'node:stream';
import zlib from 'node:zlib';
import { LzwDecoder } from './lzw-decoder.js';
import type { CompressionSuffix } from './snapshot-name.js';
import { ZstdCompress, ZstdDecompress } from './zstd-stream.js';

/** What `--compression` accepts. zstd is ours alone; ebr reads gzip, zlib and none. */
export type CompressionPolicy = 'zstd' | 'gzip' | 'zlib' | 'none';

export const COMPRESSION_POLICIES: readonly CompressionPolicy[] = ['zstd', 'gzip', 'zlib', 'none'];

const SUFFIX: Record<CompressionPolicy, CompressionSuffix> = { zstd: '.zst', gzip: '.gz', zlib: '.zlib', none: '' };

export function compressionSuffix(policy: CompressionPolicy): CompressionSuffix {
  return SUFFIX[policy];
}

/** The compression of a snapshot by the name `--compression` uses (`lzw` for ebr's `.Z`, which we only read). */
export function compressionName(suffix: CompressionSuffix): string {
  if (suffix === '.Z') return 'lzw';
  return COMPRESSION_POLICIES.find((policy) => SUFFIX[policy] === suffix) ?? suffix;
}

/**
 * A compressing stream for the policy. zstd at level 1: on etcd data it compresses as well as level 3
 * (101 vs 102 MB from a 483 MB db) at a third less CPU, which decides how close a compressed snapshot
 * keeps to etcdctl's speed. gzip at level 6, its usual default, for ebr compatibility.
 *
 * `parallel`: zstd compresses on two worker threads of its own, gzip and zlib on libuv's pool with room to
 * run ahead, while this thread receives and checks the data — for a full snapshot, where speed counts
 * (276 MB: 1.26–1.28× etcdctl's time with two zstd workers, 1.31–1.34× with one, at the same CPU time).
 * Without it zstd compresses on the calling thread, chunk by chunk (~2 ms a MiB), and starts no threads:
 * a delta is small, and the sidecar writes one every few seconds.
 */
export function compressor(policy: CompressionPolicy, options: { parallel?: boolean } = {}): Transform {
  switch (policy) {
    case 'zstd':
      return new ZstdCompress({ level: 1, workers: options.parallel ? 2 : 0 });
    case 'gzip':
      return zlib.createGzip({ ...(options.parallel ? OVERLAP : {}), level: 6 });
    case 'zlib':
      return zlib.createDeflate({ ...(options.parallel ? OVERLAP : {}), level: 6 });
    case 'none':
      return new PassThrough();
  }
}

/**
 * gzip and zlib run on libuv's thread pool. With the default buffers a compressor refuses the next chunk
 * until it has finished the last, so receiving and compressing take turns; 4 MiB on each side lets them
 * overlap, for a full snapshot (`parallel`). A delta keeps the defaults: its compressor holds the sidecar's
 * memory, and it is small.
 */
const OVERLAP = { writableHighWaterMark: 4 << 20, readableHighWaterMark: 4 << 20 };

/**
 * zlib hands its output on in 16 KiB chunks by default, each a callback from libuv's pool and a write of its own,
 * which cost more than the inflating: a 179 MB db out of 97 MB of gzip took 1.74 s (1.8 s of CPU) at 16 KiB, 0.77–0.86 s at
 * 256 KiB (scripts/bench/restore-phases.ts). The chunks die young (the pipelines collect every few MiB).
 */
const INFLATE = { chunkSize: 256 << 10 };

/** A decompressing stream for an object's name suffix. */
export function decompressor(suffix: CompressionSuffix): Transform {
  switch (suffix) {
    case '.zst':
      return new ZstdDecompress();
    case '.gz':
      return zlib.createGunzip(INFLATE);
    case '.zlib':
      return zlib.createInflate(INFLATE);
    case '':
      return new PassThrough();
    case '.Z':
      return new LzwDecoder();
  }
}
