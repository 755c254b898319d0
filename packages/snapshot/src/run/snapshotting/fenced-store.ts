import type { Readable } from 'node:stream';
import {
  type GetOptions,
  type PutOptions,
  type SnapStore,
  type StoredObject,
  storeFile,
} from '@etcd-steward/core/store';
import { NotLeaderError } from '../leadership/leadership.js';

/**
 * A store only the leading sidecar may write to, as a wrapper around any store (the way restic wraps backends
 * with retries): every put and delete first asks etcd whether this sidecar's member still leads. A sidecar
 * that lost the lead moments ago therefore cannot start one more upload that would overlap the new leader's.
 */
export class FencedStore implements SnapStore {
  readonly location: string;

  constructor(
    private readonly inner: SnapStore,
    private readonly isLeader: () => Promise<boolean>,
  ) {
    this.location = inner.location;
  }

  async put(name: string, body: Readable, options?: PutOptions): Promise<void> {
    try {
      await this.fence();
    } catch (err) {
      body.destroy();
      throw err;
    }
    return this.inner.put(name, body, options);
  }

  async putFile(name: string, path: string, options?: PutOptions): Promise<void> {
    await this.fence();
    return storeFile(this.inner, name, path, options);
  }

  async delete(name: string): Promise<void> {
    await this.fence();
    return this.inner.delete(name);
  }

  get(name: string, options?: GetOptions): Promise<Readable> {
    return this.inner.get(name, options);
  }

  list(prefix?: string): Promise<StoredObject[]> {
    return this.inner.list(prefix);
  }

  stat(name: string): Promise<StoredObject | undefined> {
    return this.inner.stat(name);
  }

  async close(): Promise<void> {
    await this.inner.close?.();
  }

  private async fence(): Promise<void> {
    if (!(await this.isLeader())) throw new NotLeaderError();
  }
}
