import type { ProcessSettings } from '@etcd-steward/core/process-restart';

/**
 * What etcd-compact runs with: one malloc arena. Its restore replays the chain in a worker thread
 * (core's restore/isolated-replay.ts), which would otherwise get a malloc arena of its own and keep it after it ends,
 * while the compaction goes on (packages/restore/src/process-settings.ts).
 */
export const COMPACT_SETTINGS: ProcessSettings = {
  nodeFlags: [],
  env: { MALLOC_ARENA_MAX: '1' },
};
