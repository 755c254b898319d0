import { memberHolderIdentity, type PodIdentity, renewedMemberLease, updateObject } from '@etcd-steward/core';
import type { Component } from './components.js';
import type { KubeClient } from './kube-client.js';
import type { KubePublisher } from './kube-publisher.js';
import type { Leadership } from './leadership.js';

/**
 * `--enable-member-lease-renewal`: the pod's lease (named after the pod) renewed every heartbeat with the holder
 * identity `<memberID>:<clusterID>:Leader|Member`, as ebr's heartbeat does, and at once when the role changes.
 * While etcd does not answer, the lease is not renewed: it expiring is how the member's absence shows.
 */
export class MemberLeaseRenewal implements Component {
  readonly name = 'member-lease-renewal';
  private timer?: NodeJS.Timeout;
  private unsubscribe?: () => void;

  constructor(
    private readonly options: {
      client: KubeClient;
      publisher: KubePublisher;
      leadership: Leadership;
      pod: PodIdentity;
      heartbeatMs: number;
    },
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = this.options.leadership.onChange(() => this.renew());
    this.renew();
    this.timer = setInterval(() => this.renew(), this.options.heartbeatMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.unsubscribe?.();
  }

  private renew(): void {
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
