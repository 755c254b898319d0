/**
 * What the steward publishes to Kubernetes, independent of the client that sends it: the pod's identity, the
 * member and snapshot leases (ebr's semantics), druid's EtcdMember status, and updates under optimistic
 * concurrency (a conflicting update re-read and retried).
 * May use: common/, etcd/.
 */

export * from './druid-etcd-config.js';
export * from './etcd-member-status.js';
export * from './kube-object.js';
export * from './member-lease.js';
export * from './member-lease-identity.js';
export * from './pod-identity.js';
export * from './snapshot-lease.js';
