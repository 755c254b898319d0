/**
 * A versioned S3 bucket with Object Lock, as the store meets it: first the test server itself, spoken to with the
 * real SDK as S3's documentation says it answers (test/servers/s3-versions.ts), then the S3 store on it.
 */

import { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetBucketVersioningCommand,
  GetObjectCommand,
  GetObjectLockConfigurationCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import {
  catalogStore,
  ImmutableObjectError,
  listSnapshots,
  ObjectExistsError,
  ObjectNotFoundError,
  type SnapStore,
} from '@etcd-steward/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type S3Target, startS3Target } from './s3-target.js';

let target: S3Target;
let client: S3Client;

beforeAll(async () => {
  target = await startS3Target('plain', { versionsPageSize: 3, buckets: ['locked', 'versioned'] });
  target.server.configureBucket('locked', { objectLock: { mode: 'COMPLIANCE', days: 1 } });
  client = new S3Client({
    endpoint: target.server.endpoint,
    region: target.server.region,
    forcePathStyle: true,
    credentials: { accessKeyId: target.server.accessKeyId, secretAccessKey: target.server.secretAccessKey },
  });
});

afterAll(async () => {
  client?.destroy();
  await target?.stop();
});

const text = async (body: unknown) =>
  Buffer.from(await (body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray()).toString();

describe('the versioned S3 test server, to the real SDK', () => {
  it('keeps every version, hides a key behind a delete marker, and lists versions newest first in pages', async () => {
    const Bucket = 'versioned';
    expect((await client.send(new GetBucketVersioningCommand({ Bucket }))).Status).toBeUndefined();
    await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'before versioning' }));
    await client.send(new PutBucketVersioningCommand({ Bucket, VersioningConfiguration: { Status: 'Enabled' } }));
    expect((await client.send(new GetBucketVersioningCommand({ Bucket }))).Status).toBe('Enabled');
    const second = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'second', Metadata: { a: '1' } }));
    const third = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'third' }));
    expect(second.VersionId).toMatch(/.{8,}/);
    expect(third.VersionId).not.toBe(second.VersionId);
    expect(await text((await client.send(new GetObjectCommand({ Bucket, Key: 'k' }))).Body)).toBe('third');
    const old = await client.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: second.VersionId }));
    expect(await text(old.Body)).toBe('second');
    expect(old.Metadata).toEqual({ a: '1' });
    const ranged = await client.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: 'null', Range: 'bytes=7-' }));
    expect(await text(ranged.Body)).toBe('versioning');

    const deleted = await client.send(new DeleteObjectCommand({ Bucket, Key: 'k' }));
    expect(deleted.DeleteMarker).toBe(true);
    const hidden = await client.send(new HeadObjectCommand({ Bucket, Key: 'k' })).catch((err) => err);
    expect(hidden.$metadata.httpStatusCode).toBe(404);
    expect(hidden.$response?.headers['x-amz-delete-marker']).toBe('true');
    expect((await client.send(new ListObjectsV2Command({ Bucket }))).Contents ?? []).toEqual([]);

    await client.send(new PutObjectCommand({ Bucket, Key: 'l', Body: 'other key' }));
    const pages = [];
    let KeyMarker: string | undefined;
    let VersionIdMarker: string | undefined;
    do {
      const page = await client.send(new ListObjectVersionsCommand({ Bucket, KeyMarker, VersionIdMarker }));
      pages.push(page);
      KeyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      VersionIdMarker = page.IsTruncated ? page.NextVersionIdMarker : undefined;
    } while (KeyMarker);
    expect(pages.length).toBe(2); // five entries, three a page
    const markers = pages.flatMap((p) => p.DeleteMarkers ?? []);
    const versions = pages.flatMap((p) => p.Versions ?? []);
    expect(markers.map((m) => [m.Key, m.IsLatest])).toEqual([['k', true]]);
    expect(versions.map((v) => [v.Key, v.VersionId, v.IsLatest, v.Size])).toEqual([
      ['k', third.VersionId, false, 5],
      ['k', second.VersionId, false, 6],
      ['k', 'null', false, 17],
      ['l', expect.any(String), true, 9],
    ]);

    // removing the marker brings the newest version back
    await client.send(new DeleteObjectCommand({ Bucket, Key: 'k', VersionId: markers[0].VersionId }));
    expect(await text((await client.send(new GetObjectCommand({ Bucket, Key: 'k' }))).Body)).toBe('third');
  });

  it('under a COMPLIANCE default retention, refuses to delete a version and only hides the key', async () => {
    const Bucket = 'locked';
    const lock = await client.send(new GetObjectLockConfigurationCommand({ Bucket }));
    expect(lock.ObjectLockConfiguration?.Rule?.DefaultRetention).toMatchObject({ Mode: 'COMPLIANCE', Days: 1 });
    const put = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'locked bytes' }));
    const head = await client.send(new HeadObjectCommand({ Bucket, Key: 'k' }));
    expect(head.ObjectLockMode).toBe('COMPLIANCE');
    expect(head.ObjectLockRetainUntilDate?.getTime()).toBeGreaterThan(Date.now() + 86_000_000);
    const refused = await client
      .send(new DeleteObjectCommand({ Bucket, Key: 'k', VersionId: put.VersionId }))
      .catch((err) => err);
    expect(refused.name).toBe('AccessDenied');
    expect(refused.message).toMatch(/object lock/);
    expect((await client.send(new DeleteObjectCommand({ Bucket, Key: 'k' }))).DeleteMarker).toBe(true);
    const kept = await client.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: put.VersionId }));
    expect(await text(kept.Body)).toBe('locked bytes');
    const unversioned = await client
      .send(new GetBucketVersioningCommand({ Bucket: 'plain' }))
      .then((r) => r.Status ?? 'never enabled');
    expect(unversioned).toBe('never enabled');
  });
});

describe('the S3 store on a versioned bucket', () => {
  const full = 'v2/Full-00000000-00000010-1767225600.gz';
  const body = (text: string) => Readable.from([Buffer.from(text)]);
  const read = async (store: SnapStore, name: string, versionId?: string) =>
    Buffer.concat(await (await store.get(name, { versionId })).toArray()).toString();

  it('says how the bucket is protected: versioning, Object Lock and its default retention', async () => {
    const locked = await target.open('protection', {}, 'locked');
    const versioned = await target.open('protection', {}, 'versioned');
    const plain = await target.open('protection');
    try {
      expect(await locked.protection?.()).toMatchObject({
        versioning: 'on',
        objectLock: { mode: 'COMPLIANCE', days: 1 },
        immutable: true,
        summary: expect.stringMatching(/^versioning on, Object Lock COMPLIANCE, 1 day\(s\) by default: immutable/),
      });
      expect(await versioned.protection?.()).toMatchObject({ versioning: 'on', immutable: false });
      expect((await versioned.protection?.())?.objectLock).toBeUndefined();
      expect(await plain.protection?.()).toMatchObject({
        versioning: 'off',
        immutable: false,
        summary: expect.stringMatching(/a snapshot deleted or overwritten is lost/),
      });
      expect(await plain.listVersions?.('v2/')).toBeUndefined();
    } finally {
      await Promise.all([locked, versioned, plain].map((s) => s.close?.()));
    }
  });

  it('lists versions newest first across pages, and reads and stats each by its id', async () => {
    const store = await target.open('listing', {}, 'versioned');
    try {
      await store.put(full, body('first'), { metadata: { sha256: 'a' } });
      // what an attacker's PUT and DELETE leave: a newer version, then a marker
      await client.send(new PutObjectCommand({ Bucket: 'versioned', Key: `listing/${full}`, Body: 'garbage' }));
      await client.send(new DeleteObjectCommand({ Bucket: 'versioned', Key: `listing/${full}` }));
      await store.put('v2/Incr-00000011-00000012-1767225700.gz', body('delta'));
      const versions = (await store.listVersions?.('v2/')) ?? [];
      expect(versions.map((v) => [v.name, v.deleteMarker, v.latest, v.size])).toEqual([
        [full, true, true, 0],
        [full, false, false, 7],
        [full, false, false, 5],
        ['v2/Incr-00000011-00000012-1767225700.gz', false, true, 5],
      ]);
      expect(await store.stat(full)).toBeUndefined();
      await expect(store.get(full)).rejects.toBeInstanceOf(ObjectNotFoundError);
      expect(await read(store, full, versions[2].versionId)).toBe('first');
      expect(await read(store, full, versions[1].versionId)).toBe('garbage');
      expect((await store.stat(full, { versionId: versions[2].versionId }))?.metadata).toEqual({ sha256: 'a' });

      // a catalog with versions lists the hidden snapshot from its newest version; without, it is not there
      expect((await listSnapshots(store)).map((e) => e.name)).toEqual(['v2/Incr-00000011-00000012-1767225700.gz']);
      const [hidden] = await listSnapshots(store, { versions: true });
      expect(hidden).toMatchObject({
        name: full,
        size: 7,
        versions: {
          kept: true,
          id: versions[1].versionId,
          why: expect.stringMatching(/^hidden by a delete marker since /),
          older: [expect.objectContaining({ versionId: versions[2].versionId, size: 5 })],
        },
      });
    } finally {
      await store.close?.();
    }
  });

  it('deletes every version of a name, never only a delete marker over them', async () => {
    const store = await target.open('delete', {}, 'versioned');
    try {
      await store.put(full, body('first'));
      await client.send(new PutObjectCommand({ Bucket: 'versioned', Key: `delete/${full}`, Body: 'second' }));
      await store.delete(full);
      expect(target.server.versionsOf('versioned', `delete/${full}`)).toEqual([]);
      // one hidden behind a marker goes too, marker and all
      await store.put(full, body('again'));
      await client.send(new DeleteObjectCommand({ Bucket: 'versioned', Key: `delete/${full}` }));
      await store.delete(full);
      expect(target.server.versionsOf('versioned', `delete/${full}`)).toEqual([]);
    } finally {
      await store.close?.();
    }
  });

  it('refuses to delete a snapshot whose versions Object Lock retains, and hides nothing', async () => {
    const store = await target.open('retained', {}, 'locked');
    try {
      await store.put(full, body('locked'));
      const before = target.server.versionsOf('locked', `retained/${full}`);
      await expect(store.delete(full)).rejects.toThrow(ImmutableObjectError);
      await expect(store.delete(full)).rejects.toThrow(/S3 object lock: retained until .* \(version /);
      expect(target.server.versionsOf('locked', `retained/${full}`)).toEqual(before);
      expect(await read(store, full)).toBe('locked');
      // the store lock is our bookkeeping, not a snapshot: deleting it hides its locked version, so it reads as gone
      await store.put('locks/maintenance.json', body('{}'));
      await store.delete('locks/maintenance.json');
      expect(await store.stat('locks/maintenance.json')).toBeUndefined();
    } finally {
      await store.close?.();
    }
  });

  it('refuses a snapshot put over one of the same name, but for the same bytes again', async () => {
    const store = await target.open('overwrite', {}, 'locked');
    try {
      await store.put(full, body('stored'), { metadata: { sha256: 'aaa' } });
      await expect(store.put(full, body('other'), { metadata: { sha256: 'bbb' } })).rejects.toThrow(
        /is stored already, with other bytes; nothing was written: the bucket keeps versions/,
      );
      await expect(store.put(full, body('other'))).rejects.toBeInstanceOf(ObjectExistsError);
      await store.put(full, body('stored'), { metadata: { sha256: 'aaa' } }); // a retried upload
      expect(target.server.versionsOf('locked', `overwrite/${full}`)).toHaveLength(1);
      expect(await read(store, full)).toBe('stored');
      // other objects are rewritten as before
      await store.put('locks/maintenance.json', body('1'));
      await store.put('locks/maintenance.json', body('2'));
      expect(await read(store, 'locks/maintenance.json')).toBe('2');
    } finally {
      await store.close?.();
    }
  });
});

describe('the S3 store when the credentials may not read the versioning', () => {
  const full = 'v2/Full-00000000-00000010-1767225600.gz';

  it('lists without versions and says which permission to grant, and still deletes a version rather than the key', async () => {
    target.server.configureBucket('versioned', { denyVersionReads: true });
    const store = await target.open('denied', {}, 'versioned');
    try {
      await store.put(full, Readable.from([Buffer.from('bytes')]));
      const catalog = await catalogStore(store, { versions: true });
      expect(catalog.snapshots.map((e) => [e.name, e.versions])).toEqual([[full, undefined]]);
      expect(catalog.versionsUnreadable).toMatch(/grant s3:GetBucketVersioning/);
      expect(await store.protection?.()).toMatchObject({
        versioning: 'unknown',
        immutable: false,
        unknown: [expect.stringMatching(/^versioning \(grant s3:GetBucketVersioning\)/)],
      });
      // the HEAD before the delete shows a version id: that version is deleted, no marker is added
      await store.delete(full);
      expect(target.server.versionsOf('versioned', `denied/${full}`)).toEqual([]);
    } finally {
      target.server.configureBucket('versioned', { denyVersionReads: false });
      await store.close?.();
    }
  });
});
