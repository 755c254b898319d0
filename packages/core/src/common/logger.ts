/**
 * Log lines on stderr: structured JSON (one object a line) when stderr is not a terminal or `--output
 * json` asked for it, short human lines on a terminal. Results go to stdout, so logs never mix with them.
 * Nothing that could hold a credential is ever passed to a logger.
 */
export type LogFields = Record<string, unknown>;

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Progress of a long operation; on a terminal one line redrawn in place. */
  progress(msg: string, fields: LogFields): void;
  readonly json: boolean;
}

export function createLogger(options: { json?: boolean; quiet?: boolean; stream?: NodeJS.WriteStream } = {}): Logger {
  const stream = options.stream ?? process.stderr;
  const json = options.json ?? !stream.isTTY;
  let progressShown = false;
  const clearProgress = () => {
    if (progressShown) stream.write('\r\x1b[2K');
    progressShown = false;
  };
  const line = (level: string, msg: string, fields: LogFields = {}) => {
    if (options.quiet && level === 'info') return;
    if (json) {
      stream.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields })}\n`);
      return;
    }
    clearProgress();
    const extra = Object.entries(fields)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
      .join(' ');
    stream.write(`${level === 'info' ? '' : `${level}: `}${msg}${extra ? `  ${extra}` : ''}\n`);
  };
  return {
    json,
    info: (msg, fields) => line('info', msg, fields),
    warn: (msg, fields) => line('warn', msg, fields),
    error: (msg, fields) => line('error', msg, fields),
    progress(msg, fields) {
      if (options.quiet) return;
      if (json) return line('progress', msg, fields);
      const extra = Object.entries(fields)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ');
      stream.write(`\r\x1b[2K${msg} ${extra}`);
      progressShown = true;
    },
  };
}

/** For library callers and tests that want no output. */
export const silentLogger: Logger = {
  json: true,
  info() {},
  warn() {},
  error() {},
  progress() {},
};
