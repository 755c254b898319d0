// etcdbrctl maps ebr's command line onto the toolkit's programs; its table and translation are exported for the
// docs page (scripts/ebr-reference.ts) and the tests.
export * from './ebr-environment.js';
export * from './ebr-flags.js';
export * from './moving-from-ebr.js';
export * from './translate.js';
