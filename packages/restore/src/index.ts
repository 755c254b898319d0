export { DataDirTarget } from './data-dir.js';
export * from './replay-method.js';
export * from './restore.js';
export * from './restore-plan.js';
export * from './restore-settings.js';
