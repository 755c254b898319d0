/**
 * Talking to etcd and running it: the client, gRPC over plain HTTP/2, watch, status, members, defragment, alarms,
 * compaction, the snapshot stream, the spawned etcd and its binaries, etcd's own snapshot restore and the member
 * data dir laid out around a db it never reads, inspecting a data dir.
 * May use: common/, bbolt/, format/.
 */
export * from './etcd-binaries.js';
export * from './etcd-client.js';
export * from './etcd-grpc.js';
export * from './etcd-maintenance.js';
export * from './etcd-members.js';
export * from './etcd-status.js';
export * from './etcd-watch.js';
export * from './go-memory.js';
export * from './keyspace-fingerprint.js';
export * from './lease-keeper.js';
export * from './member-layout.js';
export * from './orphan-processes.js';
export * from './snapshot-inspection.js';
export * from './snapshot-restore-command.js';
export * from './snapshot-stream.js';
export * from './spawned-etcd.js';
