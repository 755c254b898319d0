import { Backoff } from '../common/backoff.js';
import { errorMessage } from '../common/errors.js';
import { ImmutableObjectError, type SnapStore } from '../store/snapstore.js';

export interface DeleteOptions {
  /** Deletes in flight at once. */
  concurrency: number;
  /** Tries per object, the first included; an immutable object is not tried again. */
  attempts: number;
  baseDelayMs?: number;
  signal?: AbortSignal;
  /** Told of each object's outcome as it is known (progress, logs). */
  onOutcome?: (outcome: DeleteOutcome) => void;
}

export interface DeleteOutcome {
  name: string;
  result: 'deleted' | 'immutable' | 'failed';
  attempts: number;
  /** Why it was not deleted. */
  reason?: string;
}

/**
 * Deletes objects, `concurrency` at a time. A failed delete is tried again after a backoff and, failing still,
 * reported; it never stops the others. An object the provider keeps (immutability) is reported as such. Stops
 * starting deletes when `signal` aborts; those not started are not in the outcome.
 */
export async function deleteObjects(
  store: SnapStore,
  names: readonly string[],
  options: DeleteOptions,
): Promise<DeleteOutcome[]> {
  const outcomes: DeleteOutcome[] = [];
  let next = 0;
  const worker = async () => {
    while (next < names.length && !options.signal?.aborted) {
      const outcome = await deleteOne(store, names[next++], options);
      outcomes.push(outcome);
      options.onOutcome?.(outcome);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency, names.length)) }, worker));
  return outcomes;
}

async function deleteOne(store: SnapStore, name: string, options: DeleteOptions): Promise<DeleteOutcome> {
  const backoff = new Backoff({ baseDelayMs: options.baseDelayMs ?? 500, maxDelayMs: 10_000 });
  for (let attempt = 1; ; attempt++) {
    try {
      await store.delete(name);
      return { name, result: 'deleted', attempts: attempt };
    } catch (err) {
      if (err instanceof ImmutableObjectError)
        return { name, result: 'immutable', attempts: attempt, reason: err.message };
      if (attempt >= options.attempts || options.signal?.aborted) {
        return { name, result: 'failed', attempts: attempt, reason: errorMessage(err) };
      }
    }
    await backoff.wait(options.signal).catch(() => undefined);
  }
}
