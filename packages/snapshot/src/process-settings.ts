import type { ProcessSettings } from '@etcd-steward/core/process-restart';

/**
 * What the long-running sidecar runs with (scripts/bench/sidecar.ts; docs/sidecar.md, Performance; docs/performance.md,
 * the sidecar's memory):
 * - 2 MiB semi-spaces. Left to itself, V8 sizes its young generation by the machine's memory (semi-spaces of up to
 *   64 MiB on a 24 GB machine), and the sidecar's steady stream of short-lived objects grows it to that size: most of
 *   a 300 MB peak. Since the watch's responses are copied out and each event goes to the spool as it arrives, 2 MiB
 *   holds the sidecar 6–9 MB lower than 4 did idle and 3–6 MB at peak, at the same catch-up; 1 MiB promotes more to
 *   the old generation and did not lower the peak.
 * - V8's tiers up to Maglev, not TurboFan (`--max-opt=2`): TurboFan's code is ~5 MB of the `node` binary's pages,
 *   resident once it has run. The CPU time under writes stayed within the runs' scatter.
 * - One malloc arena. glibc gives each thread that allocates its own (libuv's pool compresses and writes, V8's
 *   workers collect), and memory freed in one is kept there: ~8 MiB less at peak, at no measurable CPU cost.
 * Not V8's `--optimize-for-size`, though it took 4–6 MB more off (docs/performance.md): with it, Node 24.21 sometimes
 * never returned from `process.exit` once @kubernetes/client-node had loaded (the main thread waiting on V8's
 * worker; 5 of 16 runs against 0 of 20 without it).
 */
export const SIDECAR_SETTINGS: ProcessSettings = {
  nodeFlags: ['--max-semi-space-size=2', '--max-opt=2'],
  env: { MALLOC_ARENA_MAX: '1' },
};

/**
 * What `save` runs with: no TurboFan and one malloc arena (zstd's workers allocate in threads of their own), for
 * the same reasons: 97–99 MB at peak against 105–106 on a 142 MB db, in the same time (docs/performance.md). V8
 * sizes the young generation itself: semi-spaces of 1 to 8 MiB did no better while a snapshot streams.
 */
export const SAVE_SETTINGS: ProcessSettings = {
  nodeFlags: ['--max-opt=2'],
  env: { MALLOC_ARENA_MAX: '1' },
};

/**
 * The settings of the command on this command line (the program's arguments): a command is the first argument that
 * names one. A flag's value that happens to be `run` or `save` only costs a restart, never a different result.
 */
export function settingsFor(args: readonly string[]): ProcessSettings | undefined {
  const command = args.find((arg) => arg === 'run' || arg === 'save' || arg === '--');
  return command === 'run' ? SIDECAR_SETTINGS : command === 'save' ? SAVE_SETTINGS : undefined;
}
