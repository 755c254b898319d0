import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { EtcdStatus } from '../src/etcd/index.js';
import { memberHolderIdentity } from '../src/kubernetes/member-lease.js';
import { memberLeaseIdentity, PEER_TLS_ANNOTATION } from '../src/kubernetes/member-lease-identity.js';
import { renewedDeltaSnapshotLease, renewedSnapshotLease } from '../src/kubernetes/snapshot-lease.js';

const where = { name: 'full-snapshot-revisions', namespace: 'shoot' };
const status = (memberId: string, leader: string): EtcdStatus => ({
  version: '3.4.23',
  dbSize: 0,
  dbSizeInUse: 0,
  leader,
  memberId,
  clusterId: '12011714581290440574',
  revision: 1,
});

describe('Kubernetes leases', () => {
  it("member lease holder: ebr's <memberID>:<clusterID>:Leader|Member, the uint64 IDs in hex beyond 2^53", () => {
    expect(memberHolderIdentity(status('18446744073709551615', '18446744073709551615'))).toBe(
      'ffffffffffffffff:a6b22ec55932577e:Leader',
    );
    expect(memberHolderIdentity(status('10276657743932975437', '1'))).toBe('8e9e05c52164694d:a6b22ec55932577e:Member');
  });

  it('a snapshot lease takes a newer revision and its time, keeps a higher one, and replaces a holder that is no number', () => {
    const takenAt = new Date('2026-11-24T10:00:00Z');
    const lease = (holderIdentity?: string) => ({
      metadata: { ...where, resourceVersion: '7' },
      spec: { holderIdentity },
    });
    expect(renewedSnapshotLease(lease('100'), where, { lastRevision: 120, takenAt })?.spec).toEqual({
      holderIdentity: '120',
      renewTime: takenAt,
    });
    // A compaction published a newer full snapshot meanwhile: nothing to write.
    expect(renewedSnapshotLease(lease('130'), where, { lastRevision: 120, takenAt })).toBeUndefined();
    // The same revision again (a new leader's first full): renewed, with the time of the newer snapshot.
    expect(renewedSnapshotLease(lease('120'), where, { lastRevision: 120, takenAt })?.spec?.renewTime).toBe(takenAt);
    expect(renewedSnapshotLease(lease('garbage'), where, { lastRevision: 5, takenAt })?.spec?.holderIdentity).toBe('5');
    expect(renewedSnapshotLease(undefined, where, { lastRevision: 5, takenAt })).toEqual({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: where,
      spec: { holderIdentity: '5', renewTime: takenAt },
    });
  });
});

describe("the member Lease as druid names and reads it (etcd's config file)", () => {
  const config = async (text: string) => {
    const dir = await mkdtemp(join(tmpdir(), 'etcd-conf-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'etcd.conf.yaml');
    await writeFile(file, text);
    return { ETCD_CONF: file };
  };

  it("with druid's member name prefix and its map of peer URLs: <prefix>-<pod>, tls-enabled from the member's URLs", async () => {
    const env = await config(
      'name: etcd-main-0\nmember-name-prefix: shoot--dev\ninitial-advertise-peer-urls:\n  shoot--dev-etcd-main-0:\n  - https://etcd-main-0.etcd-main-peer:2380\n  shoot--dev-etcd-main-1:\n  - http://etcd-main-1.etcd-main-peer:2380\n',
    );
    expect(await memberLeaseIdentity('etcd-main-0', env)).toEqual({
      name: 'shoot--dev-etcd-main-0',
      annotations: { [PEER_TLS_ANNOTATION]: 'true' },
    });
    expect((await memberLeaseIdentity('etcd-main-1', env)).annotations[PEER_TLS_ANNOTATION]).toBe('false');
  });

  it("etcd's own form (one comma-separated string), no prefix: the pod's name; any http URL means no TLS", async () => {
    const env = await config('initial-advertise-peer-urls: https://a:2380,http://b:2380\n');
    expect(await memberLeaseIdentity('etcd-0', env)).toEqual({
      name: 'etcd-0',
      annotations: { [PEER_TLS_ANNOTATION]: 'false' },
    });
  });

  it('without the default file: the pod name, tls-enabled false; a named file that is missing is a usage error', async () => {
    expect(await memberLeaseIdentity('etcd-0', {})).toEqual({
      name: 'etcd-0',
      annotations: { [PEER_TLS_ANNOTATION]: 'false' },
    });
    await expect(memberLeaseIdentity('etcd-0', { ETCD_CONF: '/nonexistent/etcd.conf.yaml' })).rejects.toThrow(
      /ETCD_CONF/,
    );
  });
});

describe('the delta-snapshot lease, renewed every delta period as ebr renews it', () => {
  const where = { name: 'delta-snapshot-revisions', namespace: 'shoot' };
  const now = new Date('2026-11-24T10:00:00Z');
  const lease = (holderIdentity?: string) => ({
    metadata: { ...where, resourceVersion: '3' },
    spec: { holderIdentity },
  });

  it('always takes the time; the revision only when newer; 0 for a lease with no holder and no delta', () => {
    expect(renewedDeltaSnapshotLease(lease('40'), where, 42, now).spec).toMatchObject({
      holderIdentity: '42',
      renewTime: now,
    });
    // Idle (no new delta) or behind a newer writer: the holder stays, the time moves on.
    expect(renewedDeltaSnapshotLease(lease('50'), where, 42, now).spec).toMatchObject({
      holderIdentity: '50',
      renewTime: now,
    });
    expect(renewedDeltaSnapshotLease(lease('50'), where, undefined, now).spec).toMatchObject({
      holderIdentity: '50',
      renewTime: now,
    });
    expect(renewedDeltaSnapshotLease(lease(), where, undefined, now).spec).toMatchObject({
      holderIdentity: '0',
      renewTime: now,
    });
    expect(renewedDeltaSnapshotLease(undefined, where, 7, now)).toMatchObject({
      metadata: where,
      spec: { holderIdentity: '7', renewTime: now },
    });
  });
});
