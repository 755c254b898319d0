import type { Readable } from 'node:stream';
import type { PutOptions, SnapStore } from '@etcd-steward/core/store';
import { NotLeaderError } from '../leadership/leadership.js';
import { ForwardingStore } from './forwarding-store.js';

/**
 * A store only the leading sidecar may write to, as a wrapper around any store (the way restic wraps backends
 * with retries): every put and delete first asks etcd whether this sidecar's member still leads. A sidecar
 * that lost the lead moments ago therefore cannot start one more upload that would overlap the new leader's.
 */
export class FencedStore extends ForwardingStore {
  constructor(
    inner: SnapStore,
    private readonly isLeader: () => Promise<boolean>,
  ) {
    super(inner);
  }

  override async put(name: string, body: Readable, options?: PutOptions): Promise<void> {
    try {
      await this.fence();
    } catch (err) {
      body.destroy();
      throw err;
    }
    return this.inner.put(name, body, options);
  }

  override async putFile(name: string, path: string, options?: PutOptions): Promise<void> {
    await this.fence();
    return super.putFile(name, path, options);
  }

  override async delete(name: string): Promise<void> {
    await this.fence();
    return this.inner.delete(name);
  }

  private async fence(): Promise<void> {
    if (!(await this.isLeader())) throw new NotLeaderError();
  }
}
