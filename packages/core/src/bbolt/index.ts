/**
 * etcd's bbolt db file read and written directly, page by page (docs/etcd-formats.md §2–3): the reader, the page
 * writer, a writer of fresh (defragmented) dbs, the revision scanner for a streaming snapshot, a db file's
 * revision and the etcd version it shows.
 * May use: common/.
 */
export * from './bbolt-db-writer.js';
export * from './bbolt-file.js';
export * from './bbolt-page-refs.js';
export * from './bbolt-page-writer.js';
export * from './db-etcd-version.js';
export * from './db-file-revision.js';
export * from './snapshot-revision.js';
