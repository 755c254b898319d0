/**
 * Runs one request with its own time limit, ended early by `signal` too. The timer is cleared as soon as the
 * request settles: `AbortSignal.timeout()` would keep the request, and the part buffer it sends, reachable
 * until the timer fires, which for a fast upload holds every part of the last minute in memory.
 */
export async function withTimeout<T>(
  timeoutMs: number,
  signal: AbortSignal | undefined,
  request: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new RequestTimeoutError(timeoutMs)), timeoutMs);
  const onAbort = () => controller.abort(signal?.reason);
  if (signal?.aborted) controller.abort(signal.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await request(controller.signal);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

/** Named as the AWS SDK names its own, so that isTransient treats both alike. */
export class RequestTimeoutError extends Error {
  override name = 'TimeoutError';

  constructor(timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
  }
}
