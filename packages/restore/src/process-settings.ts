import type { ProcessSettings } from '@etcd-steward/core/process-restart';

/**
 * What etcd-restore runs with: 2 MiB semi-spaces and one malloc arena, as etcd-copy-backups and the sidecar do
 * (packages/copy-backups/src/process-settings.ts). While the replay thread writes the db, the main thread fetches
 * and decompresses the chain (core's restore/chain-feed.ts): hundreds of MB of short-lived chunks, for which V8
 * would grow its young generation to its default maximum. The replay thread shares the one arena: a thread of its
 * own would get an arena of its own, and keep it (docs/performance.md, where a restore's time goes).
 */
export const RESTORE_SETTINGS: ProcessSettings = {
  nodeFlags: ['--max-semi-space-size=2'],
  env: { MALLOC_ARENA_MAX: '1' },
};
