/**
 * Backups carried from one store to another, or to and from one tar file, every object checked on the way; and
 * a store's health check (every object read, the chains' continuity): etcd-copy-backups' library.
 * May use: common/, format/, store/, backup/.
 */
export * from './backup-selection.js';
export * from './copy-backups.js';
export * from './copy-object.js';
export * from './copy-progress.js';
export * from './delta-coverage.js';
export * from './object-check.js';
export * from './store-verify.js';
export * from './summary-text.js';
export * from './tar-export.js';
export * from './tar-import.js';
export * from './tar-manifest.js';
export * from './verified-body.js';
