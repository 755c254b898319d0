import {
  type ConditionState,
  ETCD_MEMBER_GROUP,
  ETCD_MEMBER_VERSION,
  etcdMemberStatus,
  updateObject,
} from '@etcd-steward/core/kubernetes';
import { HeartbeatComponent, type HeartbeatOptions } from './heartbeat-component.js';

/**
 * `--etcd-member-resource`: the status of druid's EtcdMember named after the pod (member and cluster ID, role,
 * revision, db size, a Ready condition, and the restore drill's BackupProven when the sidecar reads its record),
 * written when the role or reachability changes and every heartbeat.
 */
export class EtcdMemberStatusPublisher extends HeartbeatComponent {
  readonly name = 'etcd-member-status';

  constructor(
    options: HeartbeatOptions,
    /** The conditions beside Ready, as they stand at each beat. */
    private readonly conditions: () => ConditionState[] = () => [],
  ) {
    super(options);
  }

  protected beat(): void {
    const { leadership, client, pod } = this.options;
    const observed =
      leadership.role !== 'unknown' && leadership.status
        ? { status: leadership.status }
        : { reason: 'etcd does not answer the status request' };
    const now = new Date();
    const api = client.etcdMember(pod.name, pod.namespace);
    this.options.publisher.publish('etcd-member', async (onConflict) => {
      await updateObject(
        api,
        (current) => ({
          apiVersion: `${ETCD_MEMBER_GROUP}/${ETCD_MEMBER_VERSION}`,
          kind: 'EtcdMember',
          ...current,
          metadata: current?.metadata ?? { name: pod.name, namespace: pod.namespace },
          status: etcdMemberStatus(current?.status, observed, now, this.conditions()),
        }),
        onConflict,
      );
    });
  }
}
