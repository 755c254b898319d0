/**
 * The store's snapshots as backups: the catalog, chains to restore, taking a full snapshot, fetching and
 * checking fulls and deltas (through the versions a store keeps), storing deltas made here (a prefix kept by a
 * set-aside, etcd's history a chain lacks), where a point in time falls, the store lock of the
 * programs that delete snapshots.
 * May use: common/, bbolt/, format/, store/, etcd/.
 */
export * from './compacted-revision.js';
export * from './fetch-delta.js';
export * from './fetch-full-snapshot.js';
export * from './history-delta.js';
export * from './proof-record.js';
export * from './revision-digest.js';
export * from './set-aside.js';
export * from './snapshot-catalog.js';
export * from './snapshot-chain.js';
export * from './snapshot-to-file.js';
export * from './store-history.js';
export * from './store-lock.js';
export * from './stored-delta.js';
export * from './stored-versions.js';
export * from './take-full-snapshot.js';
export * from './time-cut.js';
