import type { Logger } from '../common/logger.js';
import { etaSeconds } from '../common/progress.js';

/**
 * Progress of many objects moving at once: objects done of all, bytes, rate. Reported at most every
 * `intervalMs` through the logger (one line redrawn on a terminal, a JSON line otherwise) and once at the end.
 */
export class CopyProgress {
  private readonly started = Date.now();
  private lastReport = 0;
  objectsDone = 0;
  bytes = 0;

  constructor(
    private readonly logger: Logger,
    private readonly what: string,
    private readonly objects: number,
    private readonly totalBytes: number,
    private readonly intervalMs = 1000,
  ) {}

  addBytes(n: number): void {
    this.bytes += n;
    this.maybeReport();
  }

  objectDone(): void {
    this.objectsDone++;
    this.maybeReport();
  }

  /** Bytes a second since the start. */
  rate(): number {
    const seconds = (Date.now() - this.started) / 1000;
    return seconds > 0 ? this.bytes / seconds : 0;
  }

  report(): void {
    this.lastReport = Date.now();
    this.logger.progress(this.what, {
      objects: `${this.objectsDone}/${this.objects}`,
      mb: (this.bytes / 1e6).toFixed(1),
      ...(this.totalBytes > 0 ? { percent: Math.min(100, (100 * this.bytes) / this.totalBytes).toFixed(0) } : {}),
      mbPerSecond: (this.rate() / 1e6).toFixed(1),
      ...(this.totalBytes > 0 ? { etaSeconds: etaSeconds(this.totalBytes - this.bytes, this.rate()) } : {}),
    });
  }

  private maybeReport(): void {
    if (Date.now() - this.lastReport >= this.intervalMs) this.report();
  }
}
