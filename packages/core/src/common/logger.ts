import { createRequire } from 'node:module';
import type { Ora } from 'ora';
import { isLiveTerminal, terminalStyle } from './terminal-style.js';

/**
 * Log lines on stderr: structured JSON (one object a line) when stderr is not a terminal or `--output
 * json` asked for it, short human lines on a terminal. Results go to stdout, so logs never mix with them.
 * Nothing that could hold a credential is ever passed to a logger.
 */
export type LogFields = Record<string, unknown>;

/** `--log-level`: the least severe lines shown; progress goes with info. */
export const LOG_LEVELS = ['error', 'warn', 'info'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Progress of a long operation; on a terminal one live line, redrawn in place. */
  progress(msg: string, fields: LogFields): void;
  readonly json: boolean;
}

/** A live line that nothing updated for this long is stale (its work ended without a log line): it goes. */
const STALE_PROGRESS_MS = 3000;

export function createLogger(options: { json?: boolean; level?: LogLevel; stream?: NodeJS.WriteStream } = {}): Logger {
  const stream = options.stream ?? process.stderr;
  const json = options.json ?? !stream.isTTY;
  const shown = LOG_LEVELS.slice(0, LOG_LEVELS.indexOf(options.level ?? 'info') + 1) as readonly string[];
  const style = terminalStyle(stream);
  const live = new LiveLine(stream);
  const line = (level: LogLevel, msg: string, fields: LogFields = {}) => {
    if (!shown.includes(level)) return;
    if (json) {
      stream.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields })}\n`);
      return;
    }
    live.clear();
    const extra = Object.entries(fields)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
      .join(' ');
    const prefix = level === 'error' ? style.red.bold('error: ') : level === 'warn' ? style.yellow('warn: ') : '';
    stream.write(`${prefix}${msg}${extra ? `  ${style.dim(extra)}` : ''}\n`);
  };
  return {
    json,
    info: (msg, fields) => line('info', msg, fields),
    warn: (msg, fields) => line('warn', msg, fields),
    error: (msg, fields) => line('error', msg, fields),
    progress(msg, fields) {
      if (!shown.includes('info')) return;
      if (json) {
        stream.write(`${JSON.stringify({ time: new Date().toISOString(), level: 'progress', msg, ...fields })}\n`);
        return;
      }
      live.show(`${style.bold(msg)}  ${progressText(fields)}`);
    },
  };
}

/**
 * The progress line on a terminal: a spinner beside the phase and its figures while work goes on. Where
 * live lines are off (NO_COLOR) each update is plain text instead, rewritten in place with a carriage return.
 */
class LiveLine {
  private spinner?: Ora;
  private plainShown = false;
  private staleTimer?: NodeJS.Timeout;

  constructor(private readonly stream: NodeJS.WriteStream) {}

  show(text: string): void {
    clearTimeout(this.staleTimer);
    this.staleTimer = setTimeout(() => this.clear(), STALE_PROGRESS_MS).unref();
    // A terminal that reports no width (a pty nobody sized) gets plain lines: a spinner cannot count its rows there.
    if (!isLiveTerminal(this.stream) || !(this.stream.columns > 0)) {
      this.stream.write(`\r\x1b[2K${text}`);
      this.plainShown = true;
      return;
    }
    // stdin stays the program's: ora would otherwise take it over, and Ctrl+C with it.
    this.spinner ??= loadOra()({ stream: this.stream, discardStdin: false, isEnabled: true });
    this.spinner.text = text;
    // drawn now, not at the spinner's next frame: a short phase's last figures would otherwise never show
    if (this.spinner.isSpinning) this.spinner.render();
    else this.spinner.start();
  }

  clear(): void {
    clearTimeout(this.staleTimer);
    if (this.spinner?.isSpinning) this.spinner.stop();
    if (this.plainShown) this.stream.write('\r\x1b[2K');
    this.plainShown = false;
  }
}

/**
 * ora, loaded when a live line is first drawn: a program whose output is not a terminal (the sidecar, a Job) never
 * needs it, and it costs ~1.3 MB of memory (its string-width builds an Intl.Segmenter). require: ora is an ES module
 * without top-level await, which Node loads synchronously, so the first line is drawn at once.
 */
function loadOra(): typeof import('ora').default {
  return (createRequire(import.meta.url)('ora') as typeof import('ora')).default;
}

/** The figures a progress report carries, as a person reads them: "12.0 MB  37%  10.1 MB/s  ETA 6s". */
function progressText(fields: LogFields): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    if (key === 'mb') parts.push(`${value} MB`);
    else if (key === 'percent') parts.push(`${value}%`);
    else if (key === 'mbPerSecond') parts.push(`${value} MB/s`);
    else if (key === 'revisionsPerSecond') parts.push(`${value} rev/s`);
    else if (key === 'etaSeconds') parts.push(`ETA ${formatEta(Number(value))}`);
    else if (key === 'of') parts[parts.length - 1] = `${parts.at(-1)}/${value}`;
    else parts.push(`${key} ${value}`);
  }
  return parts.join('  ');
}

function formatEta(eta: number): string {
  const seconds = Math.round(eta);
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(seconds / 3600)}h${String(Math.floor(seconds / 60) % 60).padStart(2, '0')}m`;
}

/** For library callers and tests that want no output. */
export const silentLogger: Logger = {
  json: true,
  info() {},
  warn() {},
  error() {},
  progress() {},
};
