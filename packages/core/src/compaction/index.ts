/**
 * Compaction: the newest chain of a store (a full snapshot and its deltas) folded into one new full snapshot
 * at the chain's last revision, so that the next restore starts there. The chain is restored with the restore
 * library; its db is compacted and defragmented by writing the rows etcd would keep into a new db file (or,
 * as ebr does it, by a private etcd), and the snapshot made of it is stored only once it proved to hold the
 * same keyspace, read from its db file. The store's maintenance lock, gc's, is held from the plan to the put.
 * May use: every folder before it (common/ … restore/).
 */
export * from './compact-chain.js';
export * from './compacted-db.js';
export * from './compacted-snapshot.js';
export * from './compaction-plan.js';
export * from './compaction-scratch.js';
export * from './compaction-summary.js';
export * from './etcd-compaction.js';
export * from './held-snapshot.js';
