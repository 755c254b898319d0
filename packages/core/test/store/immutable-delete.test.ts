/** Deleting an object the provider keeps from deletion: refused as immutable, the object stays, the rest go on. */
import { Readable } from 'node:stream';
import { deleteObjects, ImmutableObjectError, openStore, type SnapStore } from '@etcd-steward/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FaultProxy, startFaultProxy } from '../../../../test/servers/fault-proxy.js';
import { type AzureTarget, startAzureTarget } from './azure-target.js';
import { type GcsTarget, startGcsTarget } from './gcs-target.js';
import { FAST_RETRIES, type S3Target, startS3Target } from './s3-target.js';

const body = () => Readable.from([Buffer.from('snapshot bytes')]);
const names = ['v2/Full-00000000-00000010-100.gz', 'v2/Full-00000000-00000020-200.gz'];

async function deleteBoth(store: SnapStore) {
  for (const name of names) await store.put(name, body());
  return deleteObjects(store, names, { concurrency: 2, attempts: 3, baseDelayMs: 1 });
}

describe('GCS retention', () => {
  let target: GcsTarget;
  let store: SnapStore;
  beforeAll(async () => {
    target = await startGcsTarget();
    store = await target.open('immutable');
  });
  afterAll(async () => {
    await store?.close?.();
    await target?.stop();
  });

  it("is GCS's 403 retentionPolicyNotMet: reported immutable, not retried, the object stays, the other goes", async () => {
    target.server.retainObject(target.bucket, `immutable/${names[0]}`, new Date(Date.now() + 3_600_000));
    const outcomes = await deleteBoth(store);
    expect(outcomes.find((o) => o.name === names[0])).toMatchObject({
      result: 'immutable',
      attempts: 1,
      reason: expect.stringContaining('GCS retention or hold'),
    });
    expect(outcomes.find((o) => o.name === names[1])).toMatchObject({ result: 'deleted' });
    expect((await store.list('v2/')).map((o) => o.name)).toEqual([names[0]]);
    await expect(store.delete(names[0])).rejects.toBeInstanceOf(ImmutableObjectError);
  });
});

describe('S3 object lock', () => {
  let target: S3Target;
  let store: SnapStore;
  beforeAll(async () => {
    target = await startS3Target();
    store = await target.open('immutable');
  });
  afterAll(async () => {
    await store?.close?.();
    await target?.stop();
  });

  it('is read before the delete (which would only hide a locked version): a retention date or a legal hold keeps it', async () => {
    target.server.lockObject(target.bucket, `immutable/${names[0]}`, new Date(Date.now() + 3_600_000));
    const outcomes = await deleteBoth(store);
    expect(outcomes.find((o) => o.name === names[0])?.reason).toMatch(/S3 object lock: retained until/);
    expect(outcomes.find((o) => o.name === names[1])?.result).toBe('deleted');
    target.server.lockObject(target.bucket, `immutable/${names[0]}`, 'legal-hold');
    await expect(store.delete(names[0])).rejects.toThrow(/S3 object lock: legal hold/);
    // a retention date in the past keeps nothing
    target.server.lockObject(target.bucket, `immutable/${names[0]}`, new Date(Date.now() - 1000));
    await store.delete(names[0]);
    expect(await store.list('v2/')).toEqual([]);
  });
});

describe('Azure immutability', () => {
  let target: AzureTarget;
  let proxy: FaultProxy;
  let store: SnapStore;
  beforeAll(async () => {
    target = await startAzureTarget();
    // azurite has no immutability policies: a proxy answers the delete of one blob as Azure does for a blob under one
    proxy = await startFaultProxy({
      target: target.server.endpoint,
      answer: (req) =>
        req.method === 'DELETE' && req.url?.includes(names[0])
          ? {
              status: 409,
              headers: { 'x-ms-error-code': 'BlobImmutableDueToPolicy', 'content-type': 'application/xml' },
              body: '<?xml version="1.0" encoding="utf-8"?><Error><Code>BlobImmutableDueToPolicy</Code><Message>This operation is not permitted as the blob is immutable due to a policy.</Message></Error>',
            }
          : undefined,
    });
    const endpoint = `${proxy.endpoint}${new URL(target.server.endpoint).pathname.replace(/\/$/, '')}`;
    store = await openStore(target.url('immutable', { endpoint }), { retry: FAST_RETRIES });
  });
  afterAll(async () => {
    await store?.close?.();
    await proxy?.stop();
    await target?.stop();
  });

  it("is Azure's 409 BlobImmutableDueToPolicy: reported immutable, not retried, the other blob goes", async () => {
    const outcomes = await deleteBoth(store);
    expect(outcomes.find((o) => o.name === names[0])).toMatchObject({
      result: 'immutable',
      attempts: 1,
      reason: expect.stringContaining('Azure immutability policy or legal hold'),
    });
    expect(outcomes.find((o) => o.name === names[1])?.result).toBe('deleted');
    expect((await store.list('v2/')).map((o) => o.name)).toEqual([names[0]]);
  });
});
