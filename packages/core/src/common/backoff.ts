import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Waits between tries that grow: each may be twice as long as the one before, up to a cap, and is drawn at random
 * below it (full jitter), so that clients that failed together do not come back together.
 */
export interface BackoffPolicy {
  /** The longest first wait. */
  baseDelayMs: number;
  /** The longest wait. */
  maxDelayMs: number;
}

/** The waits of one loop of tries: longer after each failure, short again after a success. */
export class Backoff {
  private retries = 0;

  constructor(private readonly policy: BackoffPolicy) {}

  /** The wait before the next try, in whole ms; each call counts as a failure. */
  next(): number {
    const { baseDelayMs, maxDelayMs } = this.policy;
    const cap = Math.min(maxDelayMs, baseDelayMs * 2 ** Math.min(this.retries++, 30));
    return Math.round(Math.random() * cap);
  }

  /** After a success: the next wait is a first one again. */
  reset(): void {
    this.retries = 0;
  }

  /** Sleeps the next wait; rejects (an AbortError) as soon as `signal` aborts. */
  wait(signal?: AbortSignal): Promise<void> {
    return sleep(this.next(), undefined, { signal });
  }
}
