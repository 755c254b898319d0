import {
  type ChunkRef,
  compareSnapshots,
  parseChunkName,
  parseSnapshotName,
  type SnapshotRef,
} from '../format/snapshot-name.js';
import type { SnapStore, StoredObject } from '../store/snapstore.js';

export interface CatalogEntry extends SnapshotRef {
  size: number;
  metadata: Record<string, string>;
}

export interface ChunkEntry extends ChunkRef {
  size: number;
}

/** Everything under the store's snapshot folders: snapshots, ebr's chunk objects, and objects that are neither. */
export interface StoreCatalog {
  /** Oldest first, as restore reads them. */
  snapshots: CatalogEntry[];
  chunks: ChunkEntry[];
  /** Objects whose names do not parse: nothing here reads, changes or deletes them. */
  others: StoredObject[];
}

/** Every snapshot in a store (v2 and ebr's legacy v1 layout), oldest first; other objects are ignored. */
export async function listSnapshots(store: SnapStore): Promise<CatalogEntry[]> {
  return (await catalogStore(store)).snapshots;
}

export async function catalogStore(store: SnapStore): Promise<StoreCatalog> {
  const objects: StoredObject[] = [...(await store.list('v2/')), ...(await store.list('v1/'))];
  const catalog: StoreCatalog = { snapshots: [], chunks: [], others: [] };
  for (const object of objects) {
    const ref = parseSnapshotName(object.name);
    const chunk = ref ? undefined : parseChunkName(object.name);
    if (ref) catalog.snapshots.push({ ...ref, size: object.size, metadata: object.metadata });
    else if (chunk) catalog.chunks.push({ ...chunk, size: object.size });
    else catalog.others.push(object);
  }
  catalog.snapshots.sort(compareSnapshots);
  return catalog;
}
