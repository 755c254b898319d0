import { Transform } from 'node:stream';
import type { Logger } from './logger.js';

/** Whole seconds until `remaining` more at `perSecond`, as a progress report's ETA. */
export function etaSeconds(remaining: number, perSecond: number): number | undefined {
  return perSecond > 0 && Number.isFinite(perSecond) ? Math.max(0, Math.round(remaining / perSecond)) : undefined;
}

/** Counts bytes flowing through and reports them at most every `intervalMs`, with a rate and, given a total, a share and an ETA. */
export function byteProgress(logger: Logger, what: string, total?: number, intervalMs = 1000): Transform {
  const started = Date.now();
  let bytes = 0;
  let last = 0;
  const report = () => {
    const seconds = (Date.now() - started) / 1000;
    const mb = bytes / 1e6;
    logger.progress(what, {
      mb: mb.toFixed(1),
      ...(total ? { percent: Math.min(100, (100 * bytes) / total).toFixed(0) } : {}),
      mbPerSecond: seconds > 0 ? (mb / seconds).toFixed(1) : '0',
      ...(total && bytes > 0 ? { etaSeconds: etaSeconds(total - bytes, bytes / seconds) } : {}),
    });
  };
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      const now = Date.now();
      if (now - last >= intervalMs) {
        last = now;
        report();
      }
      done(null, chunk);
    },
  });
}
