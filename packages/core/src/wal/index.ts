/**
 * etcd's write-ahead log read as etcd reads it (docs/etcd-formats.md §5): segment names and order, record
 * framing, the CRC-32C chain, the last snapshot record and HardState, a torn tail told apart from damage; the raft snapshot files beside it.
 * May use: common/.
 */
export * from './crc32c.js';
export * from './raft-snapshot-file.js';
export * from './wal-scan.js';
export * from './wal-segment-decoder.js';
export * from './wal-segments.js';
