import type { Bucket, File } from '@google-cloud/storage';
import { parseChunkName, parseSnapshotName } from '../../format/snapshot-name.js';
import { listingPrefix, nameOfKey } from '../object-name.js';
import { statusOf } from '../retry.js';
import type { ObjectVersion } from '../snapstore.js';

/** How long a bucket's versioning is taken as read: it changes rarely, and a sidecar runs for months. */
const STATUS_TTL_MS = 10 * 60_000;

/**
 * What object versioning adds to the GCS store (docs/stores.md, "Immutable stores"). In a bucket with versioning on,
 * an overwrite or a delete without a generation does not remove the live object: it becomes noncurrent, stored and
 * readable by its generation, which is what an attacker's delete or overwrite leaves. GCS has no delete markers: a
 * name without a live generation reads as gone, so its listing here starts with a marker made for it (as S3 would
 * show one), for the readers that go through versions (backup/stored-versions.ts).
 */
export class GcsGenerations {
  private status?: { value: Promise<boolean>; at: number };

  constructor(
    private readonly prefix: string,
    private readonly bucket: () => Promise<Bucket>,
  ) {}

  /** Whether the bucket has versioning on; rejects when its resource cannot be read. */
  versioning(): Promise<boolean> {
    if (!this.status || Date.now() - this.status.at > STATUS_TTL_MS) {
      const value = this.bucket()
        .then((bucket) => bucket.getMetadata())
        .then(([metadata]) => metadata.versioning?.enabled === true);
      this.status = { value, at: Date.now() };
      value.catch(() => (this.status = undefined)); // asked again next time
    }
    return this.status.value;
  }

  /**
   * Every generation under `prefix` (relative to the store prefix), by name, newest first within a name, a name
   * without a live one led by its marker; undefined where the bucket keeps none (versioning off, none noncurrent).
   */
  async list(prefix: string, exactKey?: string): Promise<ObjectVersion[] | undefined> {
    const on = await this.versioning();
    const bucket = await this.bucket();
    const byName = new Map<string, File['metadata'][]>();
    let pageToken: string | undefined;
    do {
      const [files, next] = await bucket.getFiles({
        prefix: exactKey ?? listingPrefix(this.prefix, prefix),
        versions: true,
        autoPaginate: false,
        maxResults: 1000,
        pageToken,
      });
      for (const file of files) {
        const name = exactKey === undefined || file.name === exactKey ? nameOfKey(this.prefix, file.name) : undefined;
        if (name) byName.set(name, [...(byName.get(name) ?? []), file.metadata]);
      }
      pageToken = (next as { pageToken?: string } | null)?.pageToken;
    } while (pageToken);
    const all = [...byName.values()].flat();
    if (!on && !all.some((m) => m.timeDeleted)) return undefined;
    const out: ObjectVersion[] = [];
    for (const name of [...byName.keys()].sort()) {
      const generations = byName.get(name)!.sort((a, b) => Number(b.generation) - Number(a.generation));
      const [newest] = generations;
      if (newest.timeDeleted) {
        const at = new Date(newest.timeDeleted);
        out.push({
          name,
          versionId: `deleted-${at.getTime()}`,
          deleteMarker: true,
          latest: true,
          size: 0,
          lastModified: at,
        });
      }
      for (const m of generations) {
        out.push({
          name,
          versionId: String(m.generation),
          deleteMarker: false,
          latest: !m.timeDeleted,
          size: Number(m.size ?? 0),
          lastModified: new Date(m.updated ?? m.timeCreated ?? 0),
        });
      }
    }
    return out;
  }

  /**
   * Deletes a snapshot's every generation by number, oldest first (so that no older one shows while newer ones go):
   * a delete without one would only make the live one noncurrent, hidden and still billed. A generation a retention
   * policy keeps rejects (the caller's refusal), and the newer ones stay. Other objects (the store lock) are deleted
   * as usual: they read as gone once noncurrent.
   */
  async delete(name: string, key: string): Promise<void> {
    const bucket = await this.bucket();
    const snapshot = parseSnapshotName(name) !== undefined || parseChunkName(name) !== undefined;
    if (!snapshot) return void (await bucket.file(key).delete({ ignoreNotFound: true }));
    const generations = ((await this.list(name, key)) ?? []).filter((v) => !v.deleteMarker).reverse();
    for (const v of generations) {
      await bucket
        .file(key, { generation: Number(v.versionId) })
        .delete()
        .catch((err: unknown) => {
          if (statusOf(err) !== 404) throw err;
        });
    }
  }
}
