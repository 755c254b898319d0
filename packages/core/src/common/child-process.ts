import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { errorMessage, OperationError } from './errors.js';
import type { Logger } from './logger.js';

/**
 * The built `.js` file of a child process's entry module beside the caller (`callerUrl`: its import.meta.url).
 * Tests run core from its TypeScript sources, where no `.js` stands beside them: the child then starts from the
 * build (`dist/`), which scripts/test makes first.
 */
export function childEntry(callerUrl: string, file: string): string {
  const path = fileURLToPath(new URL(file, callerUrl));
  return callerUrl.endsWith('.ts') ? path.replace(/\/src\/(?!.*\/src\/)/, '/dist/') : path;
}

/** A log line a child process sends its parent, which logs it as its own. */
export interface ChildLogMessage {
  type: 'log';
  level: 'info' | 'warn' | 'progress';
  msg: string;
  fields: Record<string, unknown>;
}

/** What a child process sends its parent: log lines, then its outcome (an error by its class name and text). */
export type ChildMessage<T> =
  | ChildLogMessage
  | { type: 'done'; result: T }
  | { type: 'failed'; name: string; message: string };

/** In a child process started with an IPC channel: a Logger whose lines go to the parent. */
export function parentLogger(): Logger {
  const send = (level: ChildLogMessage['level'], msg: string, fields: Record<string, unknown> = {}) =>
    process.send!({ type: 'log', level, msg, fields } satisfies ChildLogMessage);
  return {
    json: true,
    info: (msg, fields) => send('info', msg, fields),
    warn: (msg, fields) => send('warn', msg, fields),
    error: (msg, fields) => send('warn', msg, fields),
    progress: (msg, fields) => send('progress', msg, fields),
  };
}

export interface ChildOptions {
  /** The entry module (childEntry), and its command line: never a secret, the request carries those. */
  entry: string;
  args?: string[];
  execArgv: string[];
  env?: NodeJS.ProcessEnv;
  /** The child as errors name it, e.g. "the replay process". */
  name: string;
  logger: Logger;
  signal?: AbortSignal;
  /**
   * How stopping `signal` reaches the child: `message` asks it to stop, and its outcome (an error) settles the
   * call once it has cleaned up after itself; `kill` ends it with SIGKILL and rejects with the signal's reason.
   */
  stop: 'message' | 'kill';
  /** The child's error, from its class name and text, as the caller tells errors apart. */
  revive?: (name: string, message: string) => Error;
  /** Called with the child's pid once it runs (to record it for a later run to stop). */
  started?: (pid: number | undefined) => void;
  /** A message of the caller's own (neither a log line nor an outcome), and how to answer the child. */
  onMessage?: (message: { type: string }, send: (message: object) => void) => void;
}

/**
 * Runs one request in a child process (its side: serveParent) and resolves with its result. The request goes
 * over the IPC channel, never on the command line; the child's log lines go to `logger`. A child that ends
 * without an outcome is an error naming how it ended.
 */
export function runChild<T>(options: ChildOptions, request: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    const { signal } = options;
    // stopped before it started: no child to ask or to kill
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const child = fork(options.entry, options.args ?? [], {
      execArgv: options.execArgv,
      ...(options.env ? { env: options.env } : {}),
      serialization: 'advanced',
      stdio: 'inherit',
    });
    options.started?.(child.pid);
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      fn();
    };
    const onAbort = () => {
      if (options.stop === 'message') {
        if (child.connected) child.send({ type: 'abort' });
        return;
      }
      child.kill('SIGKILL');
      settle(() => reject(signal?.reason ?? new OperationError(`${options.name} was stopped`)));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    child.on('message', (m: ChildMessage<T>) => {
      if (m.type === 'log') options.logger[m.level](m.msg, m.fields);
      else if (m.type === 'done') settle(() => resolve(m.result));
      else if (m.type === 'failed')
        settle(() => reject(options.revive?.(m.name, m.message) ?? new OperationError(m.message)));
      else options.onMessage?.(m, (answer) => child.connected && !settled && child.send(answer));
    });
    child.on('error', (err) => settle(() => reject(err)));
    child.on('exit', (code, sig) =>
      settle(() => reject(new OperationError(`${options.name} ended unexpectedly (${sig ?? `exit ${code}`})`))),
    );
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
 * stops, sends the outcome and disconnects. Without its parent nobody waits for the outcome: it exits (its
 * exit handlers stop whatever it started).
 */
export function serveParent<R, T>(
  work: (request: R, logger: Logger, signal: AbortSignal, parent: ParentChannel) => Promise<T>,
): void {
  const logger = parentLogger();
  const controller = new AbortController();
  let finished = false;
  process.on('disconnect', () => {
    if (!finished) process.exit(1);
  });
  const handlers: Array<(message: { type: string }) => void> = [];
  const parent: ParentChannel = {
    send: (message) => process.send!(message),
    onMessage: (handler) => handlers.push(handler),
  };
  process.on('message', (m: { type: string; request?: R }) => {
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
    finished = true;
    process.send!(outcome, () => process.disconnect());
  }
}
