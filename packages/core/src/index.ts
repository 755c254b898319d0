/**
 * The library every program shares, by concept, each folder using only those before it in this list
 * (docs/developer.md; test/core-layers.test.ts checks it).
 */

export * from './backup/index.js';
export * from './bbolt/index.js';
export * from './cli/index.js';
export * from './common/index.js';
export * from './etcd/index.js';
export * from './format/index.js';
export * from './replay/index.js';
export * from './store/index.js';
