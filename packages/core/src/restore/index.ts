/**
 * Rebuilding a data dir from a store, the restore library every program uses (etcd-restore, bootstrap,
 * compaction): the plan (which full snapshot, which deltas), the replay in a worker thread of its own, the
 * member's data dir laid out and swapped in only when it verified.
 * May use: every folder before it (common/ … validation/).
 */
export { DataDirTarget } from './data-dir.js';
export * from './fork-preview.js';
export * from './replay-method.js';
export * from './restore.js';
export * from './restore-plan.js';
export * from './restore-summary.js';
export * from './result-verification.js';
export * from './store-proof.js';
export * from './store-proof-summary.js';
