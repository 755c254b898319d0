/*
 * What a process that only replays a chain needs, without the rest of core: the replay runs in a child process
 * of its own (packages/restore), and the command-line layer (yargs, yaml) that the main entry loads with
 * everything else costs that process ~8 MB of heap and ~7 MB of mapped code for nothing.
 */
export * from './direct-replay-engine.js';
export * from './errors.js';
export type { EtcdBinaries } from './etcd-binaries.js';
export type { Logger } from './logger.js';
export * from './replay-chain.js';
export * from './replay-engine.js';
export * from './replay-events.js';
export * from './store/index.js';
