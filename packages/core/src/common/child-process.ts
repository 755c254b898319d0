import { fileURLToPath } from 'node:url';
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
