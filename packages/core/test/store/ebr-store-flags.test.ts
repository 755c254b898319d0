import { ebrStoreUrl, UsageError } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';

describe("ebrStoreUrl (ebr's store flags with STORAGE_CONTAINER and HOME)", () => {
  const env = { HOME: '/home/nonroot', STORAGE_CONTAINER: 'from-env', SOURCE_STORAGE_CONTAINER: 'source-env' };

  it.each([
    [{ provider: 'S3', container: 'flag', prefix: '/tmp' }, {}, 's3://flag/tmp'],
    [{ provider: 'S3', prefix: 'etcd' }, {}, 's3://from-env/etcd'],
    [{ provider: 'S3', prefix: 'etcd' }, { source: true }, 's3://source-env/etcd'],
    [
      { provider: 'Local', container: 'default.bkp', prefix: 'etcd-main' },
      {},
      'file:///home/nonroot/default.bkp/etcd-main',
    ],
    [{ provider: 'Local', container: '' }, {}, 'file:///home/nonroot/from-env'],
    [{ provider: 'Local', container: '/abs' }, {}, 'file:///home/nonroot/abs'],
    [
      { provider: 'S3', container: 'b', endpointOverride: 'http://minio:9000' },
      {},
      's3://b?endpoint=http%3A%2F%2Fminio%3A9000',
    ],
  ])('%j %j → %s', (flags, options, url) => {
    expect(ebrStoreUrl(flags, env, options)).toBe(url);
  });

  it("Local with no container at all is ebr's default.bkp; no provider and no container is no store", () => {
    expect(ebrStoreUrl({ provider: 'Local' }, { HOME: '/h' })).toBe('file:///h/default.bkp');
    expect(ebrStoreUrl({}, { HOME: '/h' })).toBeUndefined();
  });

  it.each([
    [{ provider: 'S3' }, {}, 'give --store-container or set STORAGE_CONTAINER'],
    [{ provider: 'S3' }, { source: true }, 'give --source-store-container or set SOURCE_STORAGE_CONTAINER'],
    [{ provider: 'GCS', container: 'b', endpointOverride: 'http://x' }, {}, 'for S3-compatible stores only'],
  ])('%j %j is refused: %s', (flags, options, message) => {
    expect(() => ebrStoreUrl(flags, { HOME: '/h' }, options)).toThrow(UsageError);
    expect(() => ebrStoreUrl(flags, { HOME: '/h' }, options)).toThrow(message);
  });
});
