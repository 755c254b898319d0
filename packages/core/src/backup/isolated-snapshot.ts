import { childEntry, runChild } from '../common/child-process.js';
import type { Logger } from '../common/logger.js';
import type { SnapshotFile, SnapshotToFileRequest } from './snapshot-to-file.js';

/**
 * The snapshot process's V8 heap: a small young generation, so that a stream of 128 KiB chunks does not grow it
 * (see the sidecar's process-settings.ts); the environment adds one malloc arena for zstd's and libuv's threads.
 */
const HEAP_FLAGS = ['--max-semi-space-size=4'];

/**
 * Runs snapshotToFile in a short-lived child process. What a full snapshot needs for a few seconds (the stream's
 * buffers, zstd's workers and their buffers, the young generation they churn) goes back to the system when the
 * child ends, instead of staying in a long-running process's heap and malloc arenas (the sidecar). The request
 * (credentials included) goes over the IPC channel, never on the command line. Stopping `signal` ends the child;
 * the caller removes the file.
 */
export function snapshotToFileInChild(
  request: SnapshotToFileRequest,
  logger: Logger,
  signal?: AbortSignal,
): Promise<SnapshotFile> {
  return runChild<SnapshotFile>(
    {
      entry: childEntry(import.meta.url, './isolated-snapshot-process.js'),
      execArgv: HEAP_FLAGS,
      env: { ...process.env, MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '1' },
      name: "the full snapshot's process",
      logger,
      signal,
      stop: 'kill',
    },
    request,
  );
}
