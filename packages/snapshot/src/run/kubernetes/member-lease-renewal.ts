import { memberHolderIdentity, renewedMemberLease, updateObject } from '@etcd-steward/core/kubernetes';
import { HeartbeatComponent } from './heartbeat-component.js';

/**
 * `--enable-member-lease-renewal`: the pod's lease (named after the pod) renewed every heartbeat with the holder
 * identity `<memberID>:<clusterID>:Leader|Member`, as ebr's heartbeat does, and at once when the role changes.
 * While etcd does not answer, the lease is not renewed: it expiring is how the member's absence shows.
 */
export class MemberLeaseRenewal extends HeartbeatComponent {
  readonly name = 'member-lease-renewal';

  protected beat(): void {
    const { leadership, client, pod } = this.options;
    const status = leadership.status;
    if (!status || leadership.role === 'unknown') return;
    const holder = memberHolderIdentity(status);
    const now = new Date();
    const api = client.lease(pod.name, pod.namespace);
    this.options.publisher.publish('member-lease', async (onConflict) => {
      await updateObject(api, (current) => renewedMemberLease(current, pod, holder, now), onConflict);
    });
  }
}
