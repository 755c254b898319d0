import {
  ETCD_MEMBER_GROUP,
  ETCD_MEMBER_VERSION,
  etcdMemberStatus,
  type PodIdentity,
  updateObject,
} from '@etcd-steward/core';
import type { Component } from './components.js';
import type { KubeClient } from './kube-client.js';
import type { KubePublisher } from './kube-publisher.js';
import type { Leadership } from './leadership.js';

/**
 * `--etcd-member-resource`: the status of druid's EtcdMember named after the pod (member and cluster ID, role,
 * revision, db size, a Ready condition), written when the role or reachability changes and every heartbeat.
 */
export class EtcdMemberStatusPublisher implements Component {
  readonly name = 'etcd-member-status';
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
    this.unsubscribe = this.options.leadership.onChange(() => this.publish());
    this.publish();
    this.timer = setInterval(() => this.publish(), this.options.heartbeatMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.unsubscribe?.();
  }

  private publish(): void {
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
          status: etcdMemberStatus(current?.status, observed, now),
        }),
        onConflict,
      );
    });
  }
}
