/**
 * What an etcd member needs before etcd starts on its data dir, decided and done (etcd-validate bootstrap, the
 * sidecar's /initialization): start as it is, start fresh, restore from the store (the old data moved aside), or
 * rejoin a cluster that has quorum as a learner; and the learner's promotion afterwards.
 * May use: every folder before it (common/ … restore/).
 */
export * from './bootstrap.js';
export * from './bootstrap-decision.js';
export * from './bootstrap-summary.js';
export * from './cluster-probe.js';
export * from './move-aside.js';
export * from './promote-learner.js';
export * from './rejoin-as-learner.js';
export * from './running-etcd.js';
