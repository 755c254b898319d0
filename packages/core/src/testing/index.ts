export * from './chain-store.js';
export * from './delta-chain.js';
export * from './etcd-cluster.js';
export * from './etcd-versions.js';
export * from './lzw-encoder.js';
export * from './member-data-dir.js';
export * from './restored-members.js';
export * from './workload.js';
