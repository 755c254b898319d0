import type { Readable } from 'node:stream';
import {
  type GetOptions,
  type ObjectVersion,
  type PutOptions,
  type SnapStore,
  type StatOptions,
  type StoredObject,
  storeFile,
} from '@etcd-steward/core/store';

/**
 * A store that passes every call on to `inner`: the base of the sidecar's wrappers, which change what they guard
 * (the writes) and leave the reads, versions and protection as the store answers them.
 */
export class ForwardingStore implements SnapStore {
  readonly location: string;

  constructor(protected readonly inner: SnapStore) {
    this.location = inner.location;
  }

  put(name: string, body: Readable, options?: PutOptions): Promise<void> {
    return this.inner.put(name, body, options);
  }

  putFile(name: string, path: string, options?: PutOptions): Promise<void> {
    return storeFile(this.inner, name, path, options);
  }

  delete(name: string): Promise<void> {
    return this.inner.delete(name);
  }

  get(name: string, options?: GetOptions): Promise<Readable> {
    return this.inner.get(name, options);
  }

  list(prefix?: string): Promise<StoredObject[]> {
    return this.inner.list(prefix);
  }

  stat(name: string, options?: StatOptions): Promise<StoredObject | undefined> {
    return this.inner.stat(name, options);
  }

  async listVersions(prefix?: string): Promise<ObjectVersion[] | undefined> {
    return this.inner.listVersions?.(prefix);
  }

  async close(): Promise<void> {
    await this.inner.close?.();
  }
}
