import { createReadStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import type { PutOptions, SnapStore } from '../store/snapstore.js';

/**
 * Where the compacted snapshot waits while it proves itself, before the store sees it: the finished file is
 * kept at `path` with the name and metadata it was given (the name already checked free in the store), and
 * goes into the store, as one atomic put, only when `storeIn` is called.
 */
export class HeldSnapshot implements Pick<SnapStore, 'location' | 'putFile' | 'stat'> {
  private held?: { name: string; metadata: Record<string, string> };

  constructor(
    private readonly store: SnapStore,
    readonly path: string,
  ) {}

  get location(): string {
    return this.store.location;
  }

  stat(name: string) {
    return this.store.stat(name);
  }

  async putFile(name: string, path: string, options: PutOptions = {}): Promise<void> {
    await rename(path, this.path);
    this.held = { name, metadata: options.metadata ?? {} };
  }

  /** The name the snapshot will have in the store. */
  get name(): string {
    if (!this.held) throw new Error('no snapshot is held');
    return this.held.name;
  }

  /** Puts the held snapshot into the store (atomic: the whole object or nothing, also when aborted). */
  async storeIn(options: { signal?: AbortSignal } = {}): Promise<void> {
    const put = { metadata: this.held?.metadata, signal: options.signal };
    await (this.store.putFile
      ? this.store.putFile(this.name, this.path, put)
      : this.store.put(this.name, createReadStream(this.path), put));
    await rm(this.path, { force: true });
  }
}
