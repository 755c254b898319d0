import { fileURLToPath } from 'node:url';
import { parentPort, type ResourceLimits, Worker } from 'node:worker_threads';
import { errorMessage, OperationError } from './errors.js';
import type { Logger } from './logger.js';

/**
 * The built `.js` file of a child thread's entry module beside the caller (`callerUrl`: its import.meta.url).
 * Tests run core from its TypeScript sources, where no `.js` stands beside them: the child then starts from the
 * build (`dist/`), which scripts/test makes first.
 */
export function childEntry(callerUrl: string, file: string): string {
  const path = fileURLToPath(new URL(file, callerUrl));
  return callerUrl.endsWith('.ts') ? path.replace(/\/src\/(?!.*\/src\/)/, '/dist/') : path;
}

/** A log line a child thread sends its parent, which logs it as its own. */
export interface ChildLogMessage {
  type: 'log';
  level: 'info' | 'warn' | 'progress';
  msg: string;
  fields: Record<string, unknown>;
}

/** What a child thread sends its parent: log lines, then its outcome (an error by its class name and text). */
export type ChildMessage<T> =
  | ChildLogMessage
  | { type: 'done'; result: T }
  | { type: 'failed'; name: string; message: string };

/** The messages between a parent and its child: the worker's port, from either end. */
interface Link {
  send(message: object): void;
  onMessage<M>(handler: (message: M) => void): void;
}

/** The child's end of its link. */
function childLink(): Link {
  if (!parentPort) throw new Error('serveParent runs in a worker thread that runChild started');
  const port = parentPort;
  return { send: (m) => port.postMessage(m), onMessage: (handler) => port.on('message', handler) };
}

/** In a child started by runChild: a Logger whose lines go to the parent. */
export function parentLogger(link: Link = childLink()): Logger {
  const send = (level: ChildLogMessage['level'], msg: string, fields: Record<string, unknown> = {}) =>
    link.send({ type: 'log', level, msg, fields } satisfies ChildLogMessage);
  return {
    json: true,
    info: (msg, fields) => send('info', msg, fields),
    warn: (msg, fields) => send('warn', msg, fields),
    error: (msg, fields) => send('warn', msg, fields),
    progress: (msg, fields) => send('progress', msg, fields),
  };
}

export interface ChildOptions {
  /** The entry module (childEntry). */
  entry: string;
  /**
   * Its heap's limits. A worker thread, not a process: one Node runtime in memory, not two (the `node` binary's
   * ~50 MB of pages, mapped by each process, and its start). It shares this process's environment and malloc
   * settings; its heap goes back to the system when it ends.
   */
  thread: ResourceLimits;
  /** The child as errors name it, e.g. "the replay thread". */
  name: string;
  logger: Logger;
  /** Asks the child to stop: its outcome (an error) settles the call once it has cleaned up after itself. */
  signal?: AbortSignal;
  /** The child's error, from its class name and text, as the caller tells errors apart. */
  revive?: (name: string, message: string) => Error;
  /** A message of the caller's own (neither a log line nor an outcome), and how to answer the child. */
  onMessage?: (message: { type: string }, send: (message: object) => void) => void;
}

/** The parent's end of a child thread, as runChild drives it. */
interface Child extends Link {
  readonly connected: boolean;
  onError(handler: (err: Error) => void): void;
  /** How it ended, for an error when it ended without an outcome. */
  onExit(handler: (how: string) => void): void;
  /** Waits for a child that sent its outcome to be gone, so that its memory is free when the call settles. */
  ended(): Promise<void>;
}

function threadChild(options: ChildOptions): Child {
  const worker = new Worker(options.entry, { resourceLimits: options.thread });
  let exited = false;
  const exit = new Promise<void>((resolve) => worker.once('exit', resolve));
  worker.once('exit', () => (exited = true));
  return {
    get connected() {
      return !exited;
    },
    send: (m) => worker.postMessage(m),
    onMessage: (handler) => worker.on('message', handler),
    onError: (handler) => worker.on('error', handler),
    onExit: (handler) => worker.on('exit', (code) => handler(`exit ${code}`)),
    // its outcome is sent once its work is done and cleaned up after: nothing is left for it to do
    ended: () => worker.terminate().then(() => exit),
  };
}

/**
 * Runs one request in a child thread (its side: serveParent) and resolves with its result. The request goes over
 * the worker's port; the child's log lines go to `logger`.
 * A child that ends without an outcome is an error naming how it ended.
 */
export function runChild<T>(options: ChildOptions, request: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    const { signal } = options;
    // stopped before it started: no child to ask
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const child = threadChild(options);
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      fn();
    };
    const onAbort = () => {
      if (child.connected) child.send({ type: 'abort' });
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    child.onMessage((m: ChildMessage<T>) => {
      if (m.type === 'log') options.logger[m.level](m.msg, m.fields);
      else if (m.type === 'done') settle(() => void child.ended().then(() => resolve(m.result), reject));
      else if (m.type === 'failed') {
        const err = options.revive?.(m.name, m.message) ?? new OperationError(m.message);
        settle(() => void child.ended().then(() => reject(err), reject));
      } else options.onMessage?.(m, (answer) => child.connected && !settled && child.send(answer));
    });
    child.onError((err) => settle(() => reject(err)));
    child.onExit((how) => settle(() => reject(new OperationError(`${options.name} ended unexpectedly (${how})`))));
    child.send({ type: 'start', request });
  });
}

/** The child's side of messages of the caller's own (runChild's `onMessage`). */
export interface ParentChannel {
  send(message: { type: string; [field: string]: unknown }): void;
  /** Every message of the caller's own from the parent, from now on. */
  onMessage(handler: (message: { type: string }) => void): void;
}

/**
 * The child's side of runChild: runs `work` on the request it is sent, with a signal that an `abort` message
 * stops, and sends the outcome.
 */
export function serveParent<R, T>(
  work: (request: R, logger: Logger, signal: AbortSignal, parent: ParentChannel) => Promise<T>,
): void {
  const link = childLink();
  const logger = parentLogger(link);
  const controller = new AbortController();
  const handlers: Array<(message: { type: string }) => void> = [];
  const parent: ParentChannel = {
    send: (message) => link.send(message),
    onMessage: (handler) => handlers.push(handler),
  };
  link.onMessage((m: { type: string; request?: R }) => {
    if (m.type === 'abort') controller.abort(new Error('stopped'));
    else if (m.type === 'start' && m.request) void run(m.request);
    else for (const handler of handlers) handler(m);
  });
  async function run(request: R): Promise<void> {
    let outcome: ChildMessage<T>;
    try {
      outcome = { type: 'done', result: await work(request, logger, controller.signal, parent) };
    } catch (err) {
      outcome = { type: 'failed', name: (err as Error)?.name ?? 'Error', message: errorMessage(err) };
    }
    link.send(outcome);
  }
}
