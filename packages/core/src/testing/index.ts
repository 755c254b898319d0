export * from './etcd-cluster.js';
export * from './workload.js';
