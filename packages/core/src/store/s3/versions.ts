import {
  DeleteObjectCommand,
  GetBucketVersioningCommand,
  GetObjectLockConfigurationCommand,
  HeadObjectCommand,
  ListObjectVersionsCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { errorMessage } from '../../common/errors.js';
import { parseChunkName, parseSnapshotName } from '../../format/snapshot-name.js';
import { listingPrefix, nameOfKey } from '../object-name.js';
import { statusOf } from '../retry.js';
import type { ObjectVersion, StoreProtection } from '../snapstore.js';
import type { S3Config } from './config.js';
import { s3Failure } from './errors.js';

/** A bucket's versioning as GetBucketVersioning says it: never turned on has no status. */
export type VersioningStatus = 'Enabled' | 'Suspended' | undefined;

/** How long a bucket's versioning status is taken as read: it changes rarely, and a sidecar runs for months. */
const STATUS_TTL_MS = 10 * 60_000;

/**
 * What a versioned bucket adds to the S3 store (docs/stores.md, "Immutable stores"): its versioning status, the
 * versions of keys, the deletion of a name's versions rather than a delete marker over them, and the bucket's
 * protection (versioning, Object Lock and its default retention).
 */
export class S3Versions {
  private status?: { value: Promise<VersioningStatus>; at: number };

  constructor(
    private readonly config: S3Config,
    private readonly client: S3Client,
    private readonly customerKey: () => { SSECustomerAlgorithm?: string; SSECustomerKey?: string },
  ) {}

  /** The bucket's versioning; rejects (with what to grant) when it cannot be read. */
  versioning(): Promise<VersioningStatus> {
    if (!this.status || Date.now() - this.status.at > STATUS_TTL_MS) {
      const value = this.client
        .send(new GetBucketVersioningCommand({ Bucket: this.config.bucket }))
        .then((out) => (out.Status === 'Enabled' || out.Status === 'Suspended' ? out.Status : undefined));
      this.status = { value, at: Date.now() };
      value.catch(() => (this.status = undefined)); // asked again next time
    }
    return this.status.value.catch((err: unknown) => {
      throw s3Failure(this.config, 'read the bucket versioning (grant s3:GetBucketVersioning)', err);
    });
  }

  /** Whether the bucket keeps versions; undefined when that cannot be read (the caller does what it did before). */
  async keepsVersions(): Promise<boolean | undefined> {
    return this.versioning().then(
      (status) => status !== undefined,
      () => undefined,
    );
  }

  /** Every version under `prefix` (relative to the store prefix), by name, newest first within a name. */
  async list(prefix: string, exactKey?: string): Promise<ObjectVersion[] | undefined> {
    if ((await this.versioning()) === undefined) return undefined;
    const out: ObjectVersion[] = [];
    let keyMarker: string | undefined;
    let versionIdMarker: string | undefined;
    try {
      do {
        const page = await this.client.send(
          new ListObjectVersionsCommand({
            Bucket: this.config.bucket,
            Prefix: exactKey ?? listingPrefix(this.config.prefix, prefix),
            KeyMarker: keyMarker,
            VersionIdMarker: versionIdMarker,
          }),
        );
        const entries = [
          ...(page.Versions ?? []).map((v) => ({ ...v, deleteMarker: false })),
          ...(page.DeleteMarkers ?? []).map((m) => ({ ...m, Size: 0, deleteMarker: true })),
        ];
        for (const e of entries) {
          if (!e.Key || !e.VersionId || (exactKey !== undefined && e.Key !== exactKey)) continue;
          const name = nameOfKey(this.config.prefix, e.Key);
          if (!name) continue;
          out.push({
            name,
            versionId: e.VersionId,
            deleteMarker: e.deleteMarker,
            latest: e.IsLatest === true,
            size: e.Size ?? 0,
            lastModified: e.LastModified ?? new Date(0),
          });
        }
        keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
        versionIdMarker = page.IsTruncated ? page.NextVersionIdMarker : undefined;
      } while (keyMarker);
    } catch (err) {
      throw s3Failure(this.config, `list the versions under "${prefix}" (grant s3:ListBucketVersions)`, err);
    }
    // S3 gives versions and delete markers in two lists, each newest first within a key: merged by time, the
    // newest (IsLatest) first where two share a millisecond.
    return out.sort(
      (a, b) =>
        (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) ||
        Number(b.latest) - Number(a.latest) ||
        b.lastModified.getTime() - a.lastModified.getTime(),
    );
  }

  /**
   * Deletes a name in a versioned bucket: each of its versions by id, oldest first (so that no older version shows
   * while newer ones go), then its delete markers. A delete without a version id would only add a marker over them,
   * hiding snapshots that stay stored and billed. A snapshot with a version that Object Lock retains is refused as
   * a whole (the reason is returned, nothing is deleted). Our own bookkeeping objects (the store lock, records) are
   * hidden instead: a lock that reads as gone is released, and its locked versions expire with their retention.
   */
  async delete(name: string, key: string): Promise<{ locked: string } | undefined> {
    const versions = (await this.list(name, key)) ?? [];
    if (versions.length === 0) return undefined;
    const snapshot = parseSnapshotName(name) !== undefined || parseChunkName(name) !== undefined;
    for (const v of versions.filter((v) => !v.deleteMarker)) {
      const head = await this.client
        .send(
          new HeadObjectCommand({
            Bucket: this.config.bucket,
            Key: key,
            VersionId: v.versionId,
            ...this.customerKey(),
          }),
        )
        .catch((err: unknown) => {
          if (statusOf(err) === 404) return undefined;
          throw err;
        });
      const lock = head && objectLock(head.ObjectLockRetainUntilDate, head.ObjectLockLegalHoldStatus);
      if (!lock) continue;
      if (snapshot) return { locked: `${lock} (version ${v.versionId})` };
      if (!versions[0].deleteMarker) {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.config.bucket, Key: key }));
      }
      return undefined;
    }
    const order = [...versions.filter((v) => !v.deleteMarker).reverse(), ...versions.filter((v) => v.deleteMarker)];
    for (const v of order) {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.config.bucket, Key: key, VersionId: v.versionId }));
    }
    return undefined;
  }

  /** Versioning, Object Lock and its default retention, as far as the credentials may read them. */
  async protection(): Promise<StoreProtection> {
    const unknown: string[] = [];
    const versioning = await this.versioning().then(
      (status): StoreProtection['versioning'] =>
        status === 'Enabled' ? 'on' : status === 'Suspended' ? 'suspended' : 'off',
      (err: unknown) => {
        unknown.push(`versioning (grant s3:GetBucketVersioning): ${errorMessage(err)}`);
        return 'unknown' as const;
      },
    );
    let objectLock: StoreProtection['objectLock'];
    try {
      const out = await this.client.send(new GetObjectLockConfigurationCommand({ Bucket: this.config.bucket }));
      const config = out.ObjectLockConfiguration;
      if (config?.ObjectLockEnabled === 'Enabled') {
        const retention = config.Rule?.DefaultRetention;
        objectLock = {
          ...(retention?.Mode ? { mode: retention.Mode } : {}),
          ...(retention?.Days ? { days: retention.Days } : {}),
          ...(retention?.Years ? { years: retention.Years } : {}),
        };
      }
    } catch (err) {
      if ((err as Error).name !== 'ObjectLockConfigurationNotFoundError') {
        unknown.push(
          `Object Lock (grant s3:GetBucketObjectLockConfiguration): ${errorMessage(s3Failure(this.config, 'read the Object Lock configuration', err))}`,
        );
      }
    }
    const immutable = versioning === 'on' && objectLock?.mode !== undefined;
    return {
      versioning,
      ...(objectLock ? { objectLock } : {}),
      immutable,
      summary: summarize(versioning, objectLock, immutable),
      ...(unknown.length > 0 ? { unknown } : {}),
    };
  }
}

function summarize(
  versioning: StoreProtection['versioning'],
  lock: StoreProtection['objectLock'],
  immutable: boolean,
): string {
  const retention = lock?.mode
    ? `Object Lock ${lock.mode}, ${[lock.years && `${lock.years} year(s)`, lock.days && `${lock.days} day(s)`].filter(Boolean).join(' ')} by default`
    : lock
      ? 'Object Lock without a default retention'
      : 'no Object Lock';
  const what = immutable
    ? 'immutable: a snapshot deleted or overwritten is read from its locked version'
    : versioning === 'on' || versioning === 'suspended'
      ? 'not immutable: deleted or overwritten snapshots are read from older versions, but whoever may delete versions can remove them'
      : versioning === 'off'
        ? 'not immutable: a snapshot deleted or overwritten is lost'
        : 'protection unknown';
  return `versioning ${versioning}, ${retention}: ${what}`;
}

/** Why S3 object lock keeps an object now, or undefined when it does not. */
export function objectLock(retainUntil: Date | undefined, legalHold: string | undefined): string | undefined {
  if (legalHold === 'ON') return 'S3 object lock: legal hold';
  if (retainUntil && retainUntil.getTime() > Date.now()) {
    return `S3 object lock: retained until ${retainUntil.toISOString()}`;
  }
  return undefined;
}
