/**
 * Is a data dir safe to start etcd on? The checks of etcd-validate (layout, the db's meta pages and page tree,
 * the WAL, ebr's safe_guard, the store's newest revision) and their verdict; the keyspace a db file holds, fingerprinted without etcd.
 * May use: common/, bbolt/, wal/, format/, store/, etcd/, backup/.
 */
export * from './bbolt-tree-check.js';
export * from './db-check.js';
export * from './db-hash-kv.js';
export * from './db-keyspace.js';
export * from './safe-guard.js';
export * from './validate-data-dir.js';
export * from './verdict.js';
