/**
 * Which snapshots a store keeps and deleting the rest: ebr's Exponential and LimitBased policies and restic's
 * keep rules as pure functions of the catalog and a clock, the plan with the rule that decided each object,
 * deletion in parallel with retries, the report.
 * May use: common/, format/, store/, backup/.
 */
export * from './calendar.js';
export * from './delete-objects.js';
export * from './ebr-policies.js';
export * from './full-verdicts.js';
export * from './keep-rules.js';
export * from './prune-store.js';
export * from './retention-plan.js';
export * from './retention-report.js';
