import { EncryptedStore } from './encrypted-store.js';
import { RetryingStore } from './retry.js';
import type { RequestSender, SnapStore } from './snapstore.js';

interface CleansUploads {
  cleanupIncompleteUploads(olderThanMs: number, send?: RequestSender): Promise<number>;
}

/**
 * Aborts the multipart uploads a killed process left in the store (S3 only: GCS sessions and Azure's
 * uncommitted blocks expire by themselves). Resolves with the number aborted, or undefined when the store has
 * no such thing. A program's gc runs this with an age well above the longest upload, e.g. 24 hours.
 */
export async function cleanupIncompleteUploads(outer: SnapStore, olderThanMs: number): Promise<number | undefined> {
  const store = outer instanceof EncryptedStore ? outer.unwrap() : outer;
  const inner = store instanceof RetryingStore ? store.unwrap() : store;
  if (!('cleanupIncompleteUploads' in inner)) return undefined;
  const send = store instanceof RetryingStore ? store.sender() : undefined;
  return (inner as SnapStore & CleansUploads).cleanupIncompleteUploads(olderThanMs, send);
}
