/**
 * The store looked into without restoring a member: the events of a chain (etcd-restore log) and the keys at a
 * revision (etcd-restore get, through a scratch restore), with what they print.
 * May use: every folder before it (common/ … restore/).
 */
export * from './db-keys.js';
export * from './get-output.js';
export * from './key-filter.js';
export * from './keys-at-revision.js';
export * from './kubernetes-key.js';
export * from './log-chain.js';
export * from './log-output.js';
export * from './log-rows.js';
export * from './store-log.js';
