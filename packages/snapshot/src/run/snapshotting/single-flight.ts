/**
 * Runs at most one task per key at a time: a caller that comes while the key's task is queued or running gets
 * that task's result instead of starting another. Requests for a full snapshot use it, so that a burst of them
 * (or clients that retry after hanging up) costs one snapshot, not one each.
 */
export class SingleFlight<K, T> {
  private readonly inFlight = new Map<K, Promise<T>>();

  run(key: K, task: () => Promise<T>): Promise<T> {
    let shared = this.inFlight.get(key);
    if (!shared) {
      shared = task().finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, shared);
    }
    return shared;
  }
}
