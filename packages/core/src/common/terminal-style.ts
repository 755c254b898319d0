import { createRequire } from 'node:module';
import type { ChalkInstance } from 'chalk';

/**
 * Colour and live lines are for a person at a terminal: off when the stream is a pipe, a file or a log
 * collector, and off when NO_COLOR is set to anything (no-color.org), so those get the same bytes as ever.
 */
export function isLiveTerminal(stream: { isTTY?: boolean }): boolean {
  return Boolean(stream.isTTY) && !process.env.NO_COLOR;
}

/**
 * Styles for text written to `stream`: each returns its input unchanged where colour is off. chalk is loaded only
 * for a live terminal: it imports `node:process` as an ES module, whose namespace reads every lazy property of
 * `process` and loads what they stand for (~1.7 MB of memory in every program, the sidecar's included;
 * docs/performance.md). require: chalk is an ES module, loaded synchronously.
 */
export function terminalStyle(stream: { isTTY?: boolean }): ChalkInstance {
  if (!isLiveTerminal(stream)) return PLAIN;
  const { Chalk } = createRequire(import.meta.url)('chalk') as typeof import('chalk');
  // The 16 basic colours: every terminal has them, and they follow the user's theme.
  return new Chalk({ level: 1 });
}

/** A style that styles nothing: every style of it, however chained, returns its text as chalk without colour does. */
const PLAIN: ChalkInstance = new Proxy((...text: unknown[]) => text.join(' '), { get: () => PLAIN }) as ChalkInstance;

/** For results on stdout; the stream does not change while a program runs. */
export const resultStyle: ChalkInstance = terminalStyle(process.stdout);
