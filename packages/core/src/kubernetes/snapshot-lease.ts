import type { Lease } from './member-lease.js';

/**
 * A full- or delta-snapshot lease after a snapshot (ebr's semantics): the holder identity is the newest snapshot's
 * last revision, the renew time when it was taken. A lease already at a higher revision keeps it (another
 * writer, e.g. a compaction, published a newer snapshot); undefined then, as nothing needs writing.
 */
export function renewedSnapshotLease(
  current: Lease | undefined,
  where: { name: string; namespace: string },
  snapshot: { lastRevision: number; takenAt: Date },
): Lease | undefined {
  const held = Number(current?.spec?.holderIdentity);
  if (Number.isFinite(held) && held > snapshot.lastRevision) return undefined;
  const lease = current ?? { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { ...where } };
  lease.spec = { ...lease.spec, holderIdentity: String(snapshot.lastRevision), renewTime: snapshot.takenAt };
  return lease;
}

/**
 * The delta-snapshot lease renewed as ebr renews it after every delta period, whether or not a delta was needed:
 * the renew time is now (druid's BackupReady condition reads it, and an idle cluster must not look unbacked), the
 * holder identity the newest delta's last revision when that is higher than what it holds (`lastRevision`
 * undefined: no delta known; a lease with no holder then gets 0, as ebr gives it).
 */
export function renewedDeltaSnapshotLease(
  current: Lease | undefined,
  where: { name: string; namespace: string },
  lastRevision: number | undefined,
  now: Date,
): Lease {
  const lease = current ?? { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { ...where } };
  const holder = lease.spec?.holderIdentity;
  const held = Number(holder);
  const newer = lastRevision !== undefined && (holder === undefined || !Number.isFinite(held) || held < lastRevision);
  const holderIdentity = newer ? String(lastRevision) : (holder ?? '0');
  lease.spec = { ...lease.spec, holderIdentity, renewTime: now };
  return lease;
}
