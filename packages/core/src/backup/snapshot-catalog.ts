import { posix } from 'node:path';
import { errorMessage } from '../common/errors.js';
import {
  type ChunkRef,
  compareSnapshots,
  parseChunkName,
  parseSnapshotName,
  type SnapshotRef,
} from '../format/snapshot-name.js';
import type { SnapStore, StoredObject } from '../store/snapstore.js';
import { currentOrHidden, type EntryVersions } from './stored-versions.js';

/**
 * Where snapshots of an abandoned history go: `forks/` beside `v2/`. Neither we nor ebr list it (ebr reads only
 * paths that hold `v1` or `v2`), and nothing deletes it. A snapshot with a copy there is set aside, though a
 * retention the provider enforces may keep it in `v2/` (or a set-aside stopped between copy and delete): the chain
 * leaves it out. Moving one back (into `v2/`, its copy in `forks/` deleted) restores it as it was.
 */
export const FORKS_FOLDER = 'forks';

export interface CatalogEntry extends SnapshotRef {
  size: number;
  metadata: Record<string, string>;
  /** In a catalog listed with versions: which version is read, and the older ones (stored-versions.ts). */
  versions?: EntryVersions;
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
  /** Asked for versions, the store's could not be read (a permission missing): listed without them. */
  versionsUnreadable?: string;
}

export interface CatalogOptions {
  /**
   * List the versions the store keeps, where it keeps any (stored-versions.ts): a snapshot hidden behind a delete
   * marker is listed from its newest version, and each snapshot carries its older versions for a read whose version
   * does not verify. For the programs that read snapshots (restore, compaction, verify, copy's source) and gc, which
   * must see what they see. A store whose versions cannot be read is listed as without (`versionsUnreadable`).
   */
  versions?: boolean;
}

/** Every snapshot in a store (v2 and ebr's legacy v1 layout), oldest first; other objects are ignored. */
export async function listSnapshots(store: SnapStore, options: CatalogOptions = {}): Promise<CatalogEntry[]> {
  return (await catalogStore(store, options)).snapshots;
}

export async function catalogStore(store: SnapStore, options: CatalogOptions = {}): Promise<StoreCatalog> {
  const catalog: StoreCatalog = { snapshots: [], chunks: [], others: [] };
  let objects: Array<StoredObject & { versions?: EntryVersions }> | undefined;
  if (options.versions && store.listVersions) {
    try {
      const [v2, v1] = [await store.listVersions('v2/'), await store.listVersions('v1/')];
      objects = v2 && v1 && currentOrHidden([...v2, ...v1], (name) => parseSnapshotName(name) !== undefined);
      if (!objects) {
        // the store keeps no versions: said with each snapshot, for the message when one does not verify
        const none: EntryVersions = { kept: false, older: [], passedOver: [] };
        objects = [...(await store.list('v2/')), ...(await store.list('v1/'))].map((o) => ({ ...o, versions: none }));
      }
    } catch (err) {
      catalog.versionsUnreadable = `${errorMessage(err)}: snapshots hidden or replaced since they were stored are not seen`;
    }
  }
  objects ??= [...(await store.list('v2/')), ...(await store.list('v1/'))];
  const setAside = new Set((await store.list(`${FORKS_FOLDER}/`)).map((o) => posix.basename(o.name)));
  for (const object of objects) {
    const ref = parseSnapshotName(object.name);
    if (ref && setAside.has(posix.basename(object.name))) continue;
    const chunk = ref ? undefined : parseChunkName(object.name);
    if (ref) {
      catalog.snapshots.push({
        ...ref,
        size: object.size,
        metadata: object.metadata,
        ...(object.versions ? { versions: object.versions } : {}),
      });
    } else if (chunk) catalog.chunks.push({ ...chunk, size: object.size });
    else catalog.others.push(object);
  }
  catalog.snapshots.sort(compareSnapshots);
  return catalog;
}
