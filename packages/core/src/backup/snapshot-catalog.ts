import { compareSnapshots, parseSnapshotName, type SnapshotRef } from '../format/snapshot-name.js';
import type { SnapStore, StoredObject } from '../store/snapstore.js';

export interface CatalogEntry extends SnapshotRef {
  size: number;
  metadata: Record<string, string>;
}

/** Every snapshot in a store (v2 and ebr's legacy v1 layout), oldest first; other objects are ignored. */
export async function listSnapshots(store: SnapStore): Promise<CatalogEntry[]> {
  const objects: StoredObject[] = [...(await store.list('v2/')), ...(await store.list('v1/'))];
  const entries: CatalogEntry[] = [];
  for (const object of objects) {
    const ref = parseSnapshotName(object.name);
    if (ref) entries.push({ ...ref, size: object.size, metadata: object.metadata });
  }
  return entries.sort(compareSnapshots);
}
