import { fork } from 'node:child_process';
import { type ChildLogMessage, childEntry } from '../common/child-process.js';
import { OperationError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { SnapshotFile, SnapshotToFileRequest } from './snapshot-to-file.js';

export type SnapshotChildMessage =
  | ChildLogMessage
  | { type: 'done'; result: SnapshotFile }
  | { type: 'failed'; message: string };

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
  return new Promise((resolve, reject) => {
    signal?.throwIfAborted();
    const entry = childEntry(import.meta.url, './isolated-snapshot-process.js');
    const child = fork(entry, [], {
      execArgv: HEAP_FLAGS,
      env: { ...process.env, MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '1' },
      serialization: 'advanced',
      stdio: 'inherit',
    });
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      fn();
    };
    const onAbort = () => {
      child.kill('SIGKILL');
      settle(() => reject(signal?.reason ?? new OperationError('the full snapshot was stopped')));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    child.on('message', (m: SnapshotChildMessage) => {
      if (m.type === 'log') logger[m.level](m.msg, m.fields);
      else if (m.type === 'done') settle(() => resolve(m.result));
      else settle(() => reject(new OperationError(m.message)));
    });
    child.on('error', (err) => settle(() => reject(err)));
    child.on('exit', (code, sig) =>
      settle(() =>
        reject(new OperationError(`the full snapshot's process ended unexpectedly (${sig ?? `exit ${code}`})`)),
      ),
    );
    child.send({ type: 'start', request });
  });
}
