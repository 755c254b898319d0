/**
 * Carrying a full snapshot forward through its deltas: the chain replay, the engines (direct bbolt writes, and
 * gRPC into a private etcd as the oracle) and the rows etcd writes.
 * May use: common/, bbolt/, format/, store/, etcd/, backup/.
 */

export * from './chain-source.js';
export * from './direct-replay-engine.js';
export * from './etcd-backend-records.js';
export * from './replay-chain.js';
export * from './replay-engine.js';
export * from './replay-events.js';
