import type { EtcdStatus } from '../etcd/index.js';
import type { ObjectMeta } from './kube-object.js';

/** coordination.k8s.io/v1 Lease, the fields this code writes (the client's V1Lease fits it). */
export interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  spec?: { holderIdentity?: string; renewTime?: Date; leaseDurationSeconds?: number };
}

/** ebr's member lease holder: `<memberID>:<clusterID>:Leader|Member`, the IDs in hex as etcdctl shows them. */
export function memberHolderIdentity(status: EtcdStatus): string {
  const hex = (id: string) => BigInt(id).toString(16);
  const role = status.memberId === status.leader ? 'Leader' : 'Member';
  return `${hex(status.memberId)}:${hex(status.clusterId)}:${role}`;
}

/**
 * The lease renewed now by this member: its holder identity and the time, with `annotations` set (druid's peer-TLS
 * one) and any others kept.
 */
export function renewedMemberLease(
  current: Lease | undefined,
  where: { name: string; namespace: string },
  holderIdentity: string,
  now: Date,
  annotations: Record<string, string> = {},
): Lease {
  const lease = current ?? { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { ...where } };
  if (Object.keys(annotations).length > 0) {
    lease.metadata = { ...lease.metadata, annotations: { ...lease.metadata?.annotations, ...annotations } };
  }
  lease.spec = { ...lease.spec, holderIdentity, renewTime: now };
  return lease;
}
