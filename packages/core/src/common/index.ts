/**
 * What every part of core uses: errors with their exit codes, the logger, progress, a byte queue, bounded buffering and
 * prefetch, value parsers, small file-system helpers, the backoff between retries.
 * May use: nothing else in core.
 */

export * from './atomic-file.js';
export * from './backoff.js';
export * from './byte-queue.js';
export * from './child-thread.js';
export * from './errors.js';
export * from './flag-values.js';
export * from './format-bytes.js';
export * from './free-port.js';
export * from './fsync-path.js';
export * from './logger.js';
export * from './memory-bound.js';
export * from './node-http.js';
export * from './pid-scope.js';
export * from './prefetch.js';
export * from './progress.js';
export * from './protobuf-wire.js';
export * from './result-stream.js';
export * from './streamed-table.js';
export * from './terminal-style.js';
