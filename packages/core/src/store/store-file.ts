import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { boundedMemory } from '../common/memory-bound.js';
import type { PutOptions, SnapStore } from './snapstore.js';

/**
 * Stores a finished local file, which it consumes: by the store's own putFile where it has one (the local
 * store renames it), else streamed with the young generation collected as it goes, so that a snapshot's
 * worth of dead read buffers does not pile up before V8 collects them (memory-bound.ts).
 */
export async function storeFile(
  store: Pick<SnapStore, 'put' | 'putFile'>,
  name: string,
  path: string,
  options?: PutOptions,
): Promise<void> {
  if (store.putFile) return store.putFile(name, path, options);
  const body = boundedMemory();
  // A read error destroys `body` with it, which fails the put.
  const reading = pipeline(createReadStream(path), body).catch(() => {});
  try {
    await store.put(name, body, options);
  } finally {
    body.destroy(); // a put that failed without reading to the end leaves no open file behind
  }
  await reading;
  await rm(path, { force: true });
}
