import { UsageError } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';
import { type RestoreArgs, restoreSettings } from '../src/cli/restore-settings.js';

const base: RestoreArgs = {
  'data-dir': '/var/lib/etcd',
  force: false,
  'allow-partial': false,
  'max-fetchers': 4,
  replay: 'direct',
  'max-txn-ops': 10240,
  'max-request-bytes': 10485760,
  name: 'etcd-0',
  'initial-cluster-token': 'etcd-cluster',
  'initial-advertise-peer-urls': 'http://etcd-0:2380',
};

describe('restoreSettings', () => {
  it('fills the member config from the flags, as etcd would', () => {
    const settings = restoreSettings(base);
    expect(settings.member).toEqual({
      name: 'etcd-0',
      initialCluster: 'etcd-0=http://etcd-0:2380',
      initialClusterToken: 'etcd-cluster',
      initialAdvertisePeerUrls: 'http://etcd-0:2380',
    });
    expect(settings.leaseTtl).toBe(3600);
  });

  it('keeps the point in time to the nanosecond', () => {
    const settings = restoreSettings({ ...base, 'to-time': '2026-11-21T22:15:58.863907120+01:00' });
    expect(settings.toTimeNanos).toBe(BigInt(Date.parse('2026-11-21T21:15:58Z')) * 1_000_000n + 863_907_120n);
    expect(settings.toTime?.toISOString()).toBe('2026-11-21T21:15:58.863Z');
  });

  it.each([
    [{ 'to-revision': 0 }, /--to-revision "0" is not a revision/],
    [{ 'to-revision': 1.5 }, /--to-revision/],
    [{ 'to-time': 'yesterday' }, /not an RFC 3339 time/],
    [{ 'to-time': '2026-01-01T00:00:00Z', 'to-revision': 5 }, /give one/],
    [{ 'max-fetchers': 0 }, /--max-fetchers "0" must be a whole number from 1 to 64/],
    [{ 'max-request-bytes': 10 }, /--max-request-bytes/],
    [{ 'initial-cluster': 'etcd-1=http://etcd-1:2380' }, /does not name this member/],
    [{ 'initial-cluster': 'etcd-0' }, /name=http/],
    [{ 'data-dir': ' ' }, /--data-dir is empty/],
    [
      { 'initial-advertise-peer-urls': '127.0.0.1:2380' },
      /--initial-advertise-peer-urls "127.0.0.1:2380" must be http/,
    ],
    [{ name: '' }, /--name is empty/],
  ] as Array<[Partial<RestoreArgs>, RegExp]>)('refuses %o', (change, message) => {
    expect(() => restoreSettings({ ...base, ...change })).toThrow(UsageError);
    expect(() => restoreSettings({ ...base, ...change })).toThrow(message);
  });
});
