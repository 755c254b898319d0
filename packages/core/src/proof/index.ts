/**
 * Backups proven against the live cluster: etcd's HashKV of a db rebuilt from them against every member's
 * (docs/proof.md), the first difference where they differ.
 * May use: common/, bbolt/, wal/, format/, store/, etcd/, kubernetes/, backup/, retention/, copy/, replay/, validation/.
 */
export * from './live-proof.js';
export * from './proof-summary.js';
export * from './proof-verdict.js';
