import { OperationError } from '../common/errors.js';
import type { SnapStore } from '../store/snapstore.js';
import type { CatalogEntry } from './snapshot-catalog.js';

/**
 * Where snapshots of an abandoned history go: `forks/` beside `v2/`. Neither we nor ebr list it (ebr reads only
 * paths that hold `v1` or `v2`), and nothing deletes it: moving an object back to `v2/` restores it as it was.
 */
export const FORKS_FOLDER = 'forks';

/** The folder of one fork: the revision both histories share and when it was set aside. */
export function forkFolder(commonRevision: number, now = new Date()): string {
  return `${FORKS_FOLDER}/${commonRevision}-${Math.floor(now.getTime() / 1000)}`;
}

/**
 * Moves snapshots out of the store's chain into `folder`, the newest first, so that what the chain still shows is
 * a history without holes at every moment. Each object is copied as it is stored (encrypted or not, with its
 * metadata), checked by its size, and only then deleted from `v2/`; a crash in between leaves it in both places,
 * and the next move completes it. Returns the new names.
 */
export async function setAside(
  store: SnapStore,
  entries: readonly CatalogEntry[],
  folder: string,
  options: { signal?: AbortSignal } = {},
): Promise<string[]> {
  const moved: string[] = [];
  for (const entry of [...entries].sort((a, b) => b.lastRevision - a.lastRevision)) {
    options.signal?.throwIfAborted();
    const target = `${folder}/${entry.name.split('/').pop()}`;
    const source = await store.stat(entry.name);
    if (!source) continue; // moved by another run meanwhile
    await store.put(target, await store.get(entry.name, { raw: true }), {
      metadata: source.metadata,
      signal: options.signal,
    });
    const copy = await store.stat(target);
    if (copy?.size !== source.size) {
      throw new OperationError(
        `${store.location}: the copy of ${entry.name} in ${folder} has ${copy?.size ?? 'no'} bytes, not ${source.size}; the snapshot stays where it is`,
      );
    }
    await store.delete(entry.name);
    moved.push(target);
  }
  return moved;
}
