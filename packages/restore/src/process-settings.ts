import type { ProcessSettings } from '@etcd-steward/core/process-restart';

/**
 * What etcd-restore runs with: 2 MiB semi-spaces and one malloc arena, as etcd-copy-backups and the sidecar do
 * (packages/copy-backups/src/process-settings.ts). While the replay process writes the db, this process fetches
 * and decompresses the deltas (core's restore/delta-feed.ts): hundreds of MB of short-lived chunks, for which V8
 * would grow its young generation to its default maximum, beside the replay process (docs/performance.md, where a
 * restore's time goes).
 */
export const RESTORE_SETTINGS: ProcessSettings = {
  nodeFlags: ['--max-semi-space-size=2'],
  env: { MALLOC_ARENA_MAX: '1' },
};
