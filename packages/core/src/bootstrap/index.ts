/**
 * What an etcd member needs before etcd starts on its data dir, decided and done (etcd-validate bootstrap, the
 * sidecar's /initialization): start as it is, start fresh, restore from the store (the old data moved aside), or
 * rejoin a cluster that has quorum as a learner; and the learner's promotion afterwards. etcd's config file as
 * etcd-druid mounts it, rendered for one pod and for the cluster as it is (the sidecar's /config).
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
export * from './served-etcd-config.js';
