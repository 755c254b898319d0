/**
 * The snapshot formats of the store (docs/concepts.md): object names, full snapshots and their sha256 trailer,
 * deltas and their revisions, event times and which were read back, client-side encryption, compression (zstd, gzip, zlib, lzw) and its limits.
 * May use: common/, bbolt/.
 */
export * from './compression.js';
export * from './decompressed-limit.js';
export * from './delta-format.js';
export * from './delta-revisions.js';
export * from './delta-trailer-check.js';
export * from './encryption/index.js';
export * from './event-time.js';
export * from './full-snapshot-check.js';
export * from './lzw-decoder.js';
export * from './read-back.js';
export * from './sha256-trailer.js';
export * from './snapshot-name.js';
export * from './zstd-stream.js';
