import { Readable } from 'node:stream';
import { Backoff, type BackoffPolicy } from '../common/backoff.js';
import { OperationError } from '../common/errors.js';
import {
  type CopySource,
  type GetOptions,
  ObjectNotFoundError,
  type ObjectVersion,
  type PutOptions,
  type RequestSender,
  type SnapStore,
  type StatOptions,
  type StoredObject,
  type StoreProtection,
} from './snapstore.js';

/**
 * Retries as one wrapper around any store (restic's backend_retry): providers make each request once; this
 * decides what is worth another try and how long to wait. Throttling, 5xx and dropped connections are;
 * refused connections and unknown hosts are not (they are configuration, and retrying them only delays the
 * message that says so).
 *
 * A put cannot be retried whole, because its body is a stream that cannot be rewound. So the wrapper hands
 * the provider a sender (PutOptions.send) for the requests it can send again as they are (a part, a block,
 * the commit). A get that breaks off midway is resumed where it stopped.
 */
export interface RetryPolicy extends BackoffPolicy {
  /** Tries per request, the first one included. */
  attempts: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { attempts: 10, baseDelayMs: 200, maxDelayMs: 20_000 };

const TRANSIENT_CODES = new Set([
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ECONNABORTED',
  'EAI_AGAIN',
  'ENETRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ERR_STREAM_PREMATURE_CLOSE',
  'UND_ERR_SOCKET',
  'REQUEST_SEND_ERROR', // Azure's name for a request that never got an answer
]);

const TRANSIENT_NAMES = new Set([
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'InternalError',
  'ServiceUnavailable',
  'ServerBusy',
  'OperationTimedOut',
]);

/** A failure a provider knows to be worth another try, which carries no status or code that says so. */
export class TransientError extends Error {}

/** Whether another try may succeed: looks through the `cause` chain, so providers can wrap SDK errors. */
export function isTransient(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === 'object' && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof TransientError) return true;
    const status = statusOf(e);
    if (status !== undefined)
      return status === 408 || status === 429 || (status >= 500 && status !== 501 && status !== 505);
    const { code, name, message } = e as { code?: unknown; name?: unknown; message?: unknown };
    if (typeof code === 'string' && TRANSIENT_CODES.has(code)) return true;
    if (typeof name === 'string' && TRANSIENT_NAMES.has(name)) return true;
    if (typeof message === 'string' && /socket hang up|premature close|other side closed|aborted/i.test(message)) {
      return true;
    }
  }
  return false;
}

/** The HTTP status an SDK error carries, each SDK under its own name. */
export function statusOf(err: unknown): number | undefined {
  const e = err as { $metadata?: { httpStatusCode?: unknown }; statusCode?: unknown; status?: unknown; code?: unknown };
  for (const value of [e.$metadata?.httpStatusCode, e.statusCode, e.status, e.code]) {
    if (typeof value === 'number' && value >= 100 && value < 600) return value;
  }
  return undefined;
}

export async function retry<T>(request: () => Promise<T>, policy: RetryPolicy, signal?: AbortSignal): Promise<T> {
  const backoff = new Backoff(policy);
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    try {
      return await request();
    } catch (err) {
      // An abort from the caller is final; any other abort is a request timeout inside an SDK.
      if (signal?.aborted || attempt >= policy.attempts || !isTransient(err)) throw err;
    }
    await backoff.wait(signal);
  }
}

export class RetryingStore implements SnapStore {
  readonly location: string;

  constructor(
    private readonly inner: SnapStore,
    private readonly policy: RetryPolicy = DEFAULT_RETRY_POLICY,
  ) {
    this.location = inner.location;
  }

  put(name: string, body: Readable, options: PutOptions = {}): Promise<void> {
    return this.inner.put(name, body, { ...options, send: this.sender() });
  }

  /** Retries single requests with this store's policy. No default signal: clean-up after an abort must still run. */
  sender(): RequestSender {
    return (request, signal) => retry(request, this.policy, signal);
  }

  /** Resumes a download that breaks off, at the byte where it stopped; the size comes from a stat first. */
  async get(name: string, options: GetOptions = {}): Promise<Readable> {
    const { versionId } = options;
    const object = await this.stat(name, { versionId });
    if (!object) throw new ObjectNotFoundError(this.location, name);
    let offset = options.offset ?? 0;
    const first = await retry(() => this.inner.get(name, { offset, versionId }), this.policy);
    const { inner, policy, location } = this;
    async function* resuming(): AsyncGenerator<Buffer> {
      let current: Readable | undefined = first;
      let failures = 0;
      const backoff = new Backoff(policy);
      while (true) {
        try {
          current ??= await inner.get(name, { offset, versionId });
          for await (const chunk of current) {
            offset += chunk.length;
            failures = 0;
            backoff.reset();
            yield chunk;
          }
          current = undefined;
          if (offset >= object!.size) return;
          throw new OperationError(`${location}: reading "${name}" stopped at byte ${offset} of ${object!.size}`, {
            cause: Object.assign(new Error('premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }),
          });
        } catch (err) {
          current?.destroy();
          current = undefined;
          if (++failures >= policy.attempts || !isTransient(err)) throw err;
          await backoff.wait();
        }
      }
    }
    return Readable.from(resuming(), { objectMode: false, highWaterMark: 64 * 1024 });
  }

  list(prefix?: string): Promise<StoredObject[]> {
    return retry(() => this.inner.list(prefix), this.policy);
  }

  stat(name: string, options?: StatOptions): Promise<StoredObject | undefined> {
    return retry(() => this.inner.stat(name, options), this.policy);
  }

  /** Present only where the provider keeps versions (an optional SnapStore method). */
  get listVersions(): ((prefix?: string) => Promise<ObjectVersion[] | undefined>) | undefined {
    const list = this.inner.listVersions?.bind(this.inner);
    return list && ((prefix) => retry(() => list(prefix), this.policy));
  }

  get protection(): (() => Promise<StoreProtection>) | undefined {
    const read = this.inner.protection?.bind(this.inner);
    return read && (() => retry(read, this.policy));
  }

  get copySource(): ((name: string) => CopySource | undefined) | undefined {
    return this.inner.copySource?.bind(this.inner);
  }

  /** A copy's requests are retried one by one, as a put's are. */
  get putCopy(): SnapStore['putCopy'] {
    const copy = this.inner.putCopy?.bind(this.inner);
    return (
      copy && ((name, source, expected, options) => copy(name, source, expected, { ...options, send: this.sender() }))
    );
  }

  delete(name: string): Promise<void> {
    return retry(() => this.inner.delete(name), this.policy);
  }

  async close(): Promise<void> {
    await this.inner.close?.();
  }

  /** The store this one wraps, for provider-specific operations (e.g. S3's cleanupIncompleteUploads). */
  unwrap(): SnapStore {
    return this.inner;
  }
}
