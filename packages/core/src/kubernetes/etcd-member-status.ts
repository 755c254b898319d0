import type { EtcdStatus } from '../etcd/index.js';
import type { ObjectMeta } from './kube-object.js';

export const ETCD_MEMBER_GROUP = 'druid.gardener.cloud';
export const ETCD_MEMBER_VERSION = 'v1alpha1';
export const ETCD_MEMBER_PLURAL = 'etcdmembers';

/** A Kubernetes-style condition: `lastTransitionTime` moves only when `status` changes. */
export interface MemberCondition {
  /** Ready: the member answers and follows a leader; BackupProven: the restore drill's last outcome (docs/proof.md). */
  type: 'Ready' | 'BackupProven';
  status: 'True' | 'False' | 'Unknown';
  lastTransitionTime: string;
  lastUpdateTime: string;
  reason: string;
  message: string;
}

/**
 * The status the member's sidecar owns, in the shape of druid's EtcdMember proposal (`id`, `clusterID`, `dbSize`,
 * `dbSizeInUse`), plus the member's `role` and `lastRevision` and a Ready condition.
 */
export interface EtcdMemberStatus {
  id?: string;
  clusterID?: string;
  role?: 'Leader' | 'Member';
  lastRevision?: number;
  dbSize?: number;
  dbSizeInUse?: number;
  conditions: MemberCondition[];
}

/** druid.gardener.cloud/v1alpha1 EtcdMember (named so beside etcd's own members). */
export interface EtcdMemberResource {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  status?: EtcdMemberStatus;
}

/** A condition as its publisher states it; etcdMemberStatus adds the times. */
export type ConditionState = Pick<MemberCondition, 'type' | 'status' | 'reason' | 'message'>;

/**
 * The member's status from etcd's answer, or from its silence (`reason` says why it did not answer): what was
 * known before stays, and the Ready condition says Unknown. `current` gives each condition's last transition;
 * `others` are conditions beside Ready (BackupProven), kept as they are stated.
 */
export function etcdMemberStatus(
  current: EtcdMemberStatus | undefined,
  observed: { status: EtcdStatus } | { reason: string },
  now: Date,
  others: readonly ConditionState[] = [],
): EtcdMemberStatus {
  const time = now.toISOString();
  const timed = (state: ConditionState): MemberCondition => {
    const previous = current?.conditions?.find((c) => c.type === state.type);
    return {
      ...state,
      lastTransitionTime: previous?.status === state.status ? previous.lastTransitionTime : time,
      lastUpdateTime: time,
    };
  };
  const condition = (status: MemberCondition['status'], reason: string, message: string): MemberCondition[] => [
    timed({ type: 'Ready', status, reason, message }),
    ...others.map(timed),
  ];
  if (!('status' in observed)) {
    return {
      ...current,
      conditions: condition('Unknown', 'EtcdUnreachable', `the sidecar cannot reach its member: ${observed.reason}`),
    };
  }
  const { status } = observed;
  const hex = (id: string) => BigInt(id).toString(16);
  const noLeader = status.leader === '0';
  return {
    id: hex(status.memberId),
    clusterID: hex(status.clusterId),
    role: status.leader === status.memberId ? 'Leader' : 'Member',
    lastRevision: status.revision,
    dbSize: status.dbSize,
    dbSizeInUse: status.dbSizeInUse,
    conditions: noLeader
      ? condition('False', 'NoLeader', 'the member answers but knows no leader (no quorum)')
      : condition('True', 'MemberReady', 'the member answers and follows a leader'),
  };
}
