export * from './restore.js';
export { DataDirTarget } from './data-dir.js';
