import type { ProcessSettings } from '@etcd-steward/core/process-restart';

/**
 * What every command runs with, as the sidecar does (packages/snapshot/src/process-settings.ts): 2 MiB semi-spaces,
 * V8's tiers up to Maglev only, one malloc arena. A copy streams every object through short-lived chunks, and left
 * to itself V8 grows its young generation and glibc its arenas with them: 124–126 MB at peak against 89–92 copying
 * the benchmark suite's store, where Node alone with the library loaded holds 87, in the same time
 * (docs/performance.md, etcd-copy-backups).
 */
export const COPY_SETTINGS: ProcessSettings = {
  nodeFlags: ['--max-semi-space-size=2', '--max-opt=2'],
  env: { MALLOC_ARENA_MAX: '1' },
};
