export * from './etcd-cluster.js';
export * from './workload.js';
export * from './delta-chain.js';
export * from './lzw-encoder.js';
export * from './restored-members.js';
export * from './chain-store.js';
