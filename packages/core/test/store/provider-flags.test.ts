import { storeUrlFromProviderFlags, UsageError } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';

describe('storeUrlFromProviderFlags (ebr --storage-provider, --store-container, --store-prefix)', () => {
  it.each([
    [{ provider: 'S3', container: 'backups', prefix: 'etcd-main/' }, 's3://backups/etcd-main'],
    [{ provider: 'GCS', container: 'backups', prefix: 'a/b' }, 'gs://backups/a/b'],
    [{ provider: 'ABS', container: 'backups', prefix: '' }, 'azblob://backups'],
    [{ provider: 'abs', container: 'backups' }, 'azblob://backups'],
    [{ provider: 'Local', container: '/var/etcd/backup', prefix: 'v' }, 'file:///var/etcd/backup/v'],
    [{ provider: 'S3', container: 'b', prefix: 'with space' }, 's3://b/with%20space'],
    [{ provider: 'Swift', container: 'backups', prefix: 'etcd-main' }, 'swift://backups/etcd-main'],
    [{ provider: 'OSS', container: 'backups', prefix: 'etcd-main' }, 'oss://backups/etcd-main'],
    [{ provider: 'ECS', container: 'backups' }, 'ecs://backups'],
    [{ provider: 'OCS', container: 'backups', prefix: 'x' }, 'ocs://backups/x'],
  ])('%j → %s', (flags, url) => {
    expect(storeUrlFromProviderFlags(flags)).toBe(url);
  });

  it.each([
    [{ provider: 'FTP', container: 'b' }, 'use one of S3, GCS, ABS, Swift, OSS, ECS, OCS, Local'],
    [{ provider: 'S3', container: '' }, 'needs --store-container'],
    [{ provider: 'Local', container: 'relative' }, 'absolute path'],
    [{ provider: 'S3', container: 'a/b' }, 'is not a bucket or container name'],
  ])('%j is refused: %s', (flags, message) => {
    expect(() => storeUrlFromProviderFlags(flags)).toThrow(UsageError);
    expect(() => storeUrlFromProviderFlags(flags)).toThrow(message);
  });
});
