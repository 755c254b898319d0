import { Chalk, type ChalkInstance } from 'chalk';

/**
 * Colour and live lines are for a person at a terminal: off when the stream is a pipe, a file or a log
 * collector, and off when NO_COLOR is set to anything (no-color.org), so those get the same bytes as ever.
 */
export function isLiveTerminal(stream: { isTTY?: boolean }): boolean {
  return Boolean(stream.isTTY) && !process.env.NO_COLOR;
}

/** Styles for text written to `stream`: each returns its input unchanged where colour is off. */
export function terminalStyle(stream: { isTTY?: boolean }): ChalkInstance {
  // The 16 basic colours: every terminal has them, and they follow the user's theme.
  return new Chalk({ level: isLiveTerminal(stream) ? 1 : 0 });
}

/** For results on stdout; the stream does not change while a program runs. */
export const resultStyle: ChalkInstance = terminalStyle(process.stdout);
