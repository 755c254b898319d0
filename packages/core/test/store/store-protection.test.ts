/**
 * How each store says it is protected (docs/stores.md, "Immutable stores"): S3's is in s3-versions.test.ts; here GCS's
 * bucket retention policy and versioning as its JSON API shows them, and a provider that says nothing.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, storeProtection } from '@etcd-steward/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GcsTarget, startGcsTarget } from './gcs-target.js';

describe('GCS', () => {
  let target: GcsTarget;
  beforeAll(async () => {
    target = await startGcsTarget();
  });
  afterAll(() => target?.stop());

  it('is immutable with a retention policy, says whether it is locked, and whether versioning is on', async () => {
    const store = await target.open('protection');
    try {
      expect(await storeProtection(store)).toEqual({
        versioning: 'off',
        immutable: false,
        summary:
          'versioning off, no retention policy: not immutable: a snapshot deleted or overwritten is lost to these programs',
      });
      target.server.configureBucket(target.bucket, {
        versioning: true,
        retentionPolicy: { retentionPeriodSeconds: 30 * 86_400, isLocked: true },
      });
      expect(await storeProtection(store)).toMatchObject({
        versioning: 'on',
        retentionPolicy: { seconds: 30 * 86_400, locked: true },
        immutable: true,
        summary: expect.stringMatching(/^versioning on, retention policy 30 day\(s\), locked: immutable/),
      });
      target.server.configureBucket(target.bucket, { retentionPolicy: { retentionPeriodSeconds: 3600 } });
      expect((await storeProtection(store)).summary).toMatch(/not locked \(a bucket owner can remove it\): immutable/);
    } finally {
      await store.close?.();
    }
  });
});

it('a provider that does not say is not known to be immutable', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'protection-'));
  try {
    const store = await openStore(`file://${dir}`);
    expect(await storeProtection(store)).toMatchObject({
      versioning: 'unknown',
      immutable: false,
      summary: expect.stringMatching(/^protection not reported by this provider \(file; /),
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
