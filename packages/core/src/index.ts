/**
 * The library every program shares, a folder a concept; which folder may use which: docs/developer.md, Layout
 * (test/core-layers.test.ts checks it).
 */

export * from './backup/index.js';
export * from './bbolt/index.js';
export * from './bootstrap/index.js';
export * from './cli/index.js';
export * from './common/index.js';
export * from './compaction/index.js';
export * from './copy/index.js';
export * from './etcd/index.js';
export * from './format/index.js';
export * from './inspection/index.js';
export * from './kubernetes/index.js';
export * from './maintenance/index.js';
export * from './proof/index.js';
export * from './replay/index.js';
export * from './restore/index.js';
export * from './retention/index.js';
export * from './store/index.js';
export * from './validation/index.js';
export * from './wal/index.js';
