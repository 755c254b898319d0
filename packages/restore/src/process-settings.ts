import type { ProcessSettings } from '@etcd-steward/core/process-restart';

/**
 * What etcd-restore runs with: 4 MiB semi-spaces and one malloc arena. While the replay thread writes the db, the
 * main thread fetches and decompresses the chain (core's restore/chain-feed.ts): hundreds of MB of short-lived
 * chunks, for which V8 would grow its young generation to its default maximum. 2 MiB, as etcd-copy-backups and the
 * sidecar run with, cost the main thread 0.7 s of scavenges on the benchmark suite's dataset; 4 MiB took 7% off the
 * restore's time for 10 MB at its peak, 6 and 8 MiB little more time for 25–31 MB (docs/performance.md). The replay
 * thread shares the one arena: a thread of its own would get an arena of its own, and keep it.
 */
export const RESTORE_SETTINGS: ProcessSettings = {
  nodeFlags: ['--max-semi-space-size=4'],
  env: { MALLOC_ARENA_MAX: '1' },
};
