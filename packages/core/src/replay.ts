/*
 * What a process that only replays a chain needs, without the rest of core: the replay runs in a child process
 * of its own (packages/restore), and the command-line layer (yargs, yaml) that the main entry loads with
 * everything else costs that process ~8 MB of heap and ~7 MB of mapped code for nothing.
 */

export * from './common/errors.js';
export type { Logger } from './common/logger.js';
export type { EtcdBinaries } from './etcd/etcd-binaries.js';
export * from './replay/direct-replay-engine.js';
export * from './replay/replay-chain.js';
export * from './replay/replay-engine.js';
export * from './replay/replay-events.js';
export * from './store/index.js';
