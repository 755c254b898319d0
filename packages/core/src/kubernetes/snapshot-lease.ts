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
