/**
 * Runs tasks one at a time, in the order they were queued: the snapshotter's operations (flush a delta,
 * upload the spool, take a full snapshot, resynchronise) each read and move the chain's head, so two of them
 * must never interleave.
 */
export class Serial {
  private tail: Promise<unknown> = Promise.resolve();
  private running = 0;

  run<T>(task: () => Promise<T>): Promise<T> {
    this.running++;
    const result = this.tail.then(task);
    this.tail = result.then(
      () => this.running--,
      () => this.running--,
    );
    return result;
  }

  /** Whether a task is running or waiting. */
  get busy(): boolean {
    return this.running > 0;
  }
}
