// Retention is library code in core, so that the sidecar's garbage collector runs the same.
export { type PruneOptions, type PruneReport, planRetention, pruneStore } from '@etcd-steward/core';
