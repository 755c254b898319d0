import {
  type MemberLeaseIdentity,
  memberHolderIdentity,
  renewedMemberLease,
  updateObject,
} from '@etcd-steward/core/kubernetes';
import { HeartbeatComponent, type HeartbeatOptions } from './heartbeat-component.js';

/**
 * `--enable-member-lease-renewal`: the member's lease renewed every heartbeat with the holder identity
 * `<memberID>:<clusterID>:Leader|Member`, as ebr's heartbeat does, and at once when the role changes. Its name and
 * the peer-TLS annotation are druid's (core's memberLeaseIdentity: `<member name prefix>-<pod>`,
 * `member.etcd.gardener.cloud/tls-enabled`). While etcd does not answer, the lease is not renewed: it expiring is
 * how the member's absence shows.
 */
export class MemberLeaseRenewal extends HeartbeatComponent {
  readonly name = 'member-lease-renewal';

  constructor(
    options: HeartbeatOptions,
    private readonly lease: MemberLeaseIdentity,
  ) {
    super(options);
  }

  protected beat(): void {
    const { leadership, client, pod } = this.options;
    const status = leadership.status;
    if (!status || leadership.role === 'unknown') return;
    const holder = memberHolderIdentity(status);
    const now = new Date();
    const where = { name: this.lease.name, namespace: pod.namespace };
    const api = client.lease(where.name, where.namespace);
    this.options.publisher.publish('member-lease', async (onConflict) => {
      await updateObject(
        api,
        (current) => renewedMemberLease(current, where, holder, now, this.lease.annotations),
        onConflict,
      );
    });
  }
}
