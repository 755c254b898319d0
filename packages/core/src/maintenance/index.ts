/**
 * Looking after a running etcd cluster: the etcd lock that lets one sidecar of a cluster do a job at a time,
 * defragmentation of every member in a safe order, and recovery from a NOSPACE alarm.
 * May use: every folder before it (common/ … compaction/).
 */
export * from './defragmentation.js';
export * from './etcd-lock.js';
export * from './nospace-recovery.js';
export * from './scheduled-defragmentation.js';
