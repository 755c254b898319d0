/**
 * etcd's bbolt db file read and written directly, page by page (docs/etcd-formats.md §2–3): the reader, the page
 * writer, a copy-on-write commit, a writer of fresh (defragmented) dbs and of a new empty one, the revision scanner
 * for a streaming snapshot, a db file's revision and the etcd version it shows.
 * May use: common/.
 */
export * from './bbolt-commit.js';
export * from './bbolt-db-writer.js';
export * from './bbolt-file.js';
export * from './bbolt-page-refs.js';
export * from './bbolt-page-writer.js';
export * from './db-etcd-version.js';
export * from './db-file-revision.js';
export * from './empty-db.js';
export * from './revision-key.js';
export * from './snapshot-revision.js';
