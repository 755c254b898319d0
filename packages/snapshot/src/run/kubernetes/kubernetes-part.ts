import { parseDuration, requirePositive, UsageError } from '@etcd-steward/core/common';
import { podIdentity } from '@etcd-steward/core/kubernetes';
import type { Component } from '../component.js';
import type { SidecarPart } from '../sidecar-part.js';

export interface KubernetesArgs {
  'enable-member-lease-renewal': boolean;
  'k8s-heartbeat-duration': string;
  'enable-snapshot-lease-renewal': boolean;
  'full-snapshot-lease-name': string;
  'delta-snapshot-lease-name': string;
  'etcd-member-resource': boolean;
  kubeconfig?: string;
  /** snapshotting-part.ts's: the snapshot leases follow the snapshots this sidecar takes. */
  snapshotter: boolean;
}

/**
 * What the sidecar keeps in Kubernetes: the member's Lease, the snapshot Leases, druid's EtcdMember status. On
 * when any of them is; the client is loaded only then (it adds half a second to the start).
 */
export const kubernetesPart: SidecarPart<KubernetesArgs> = {
  name: 'kubernetes',
  heading: 'Kubernetes',
  // Right after the leadership, so stopped after the snapshotter: its final snapshot still renews the lease.
  startsEarly: true,
  options: (y) =>
    y
      .option('enable-member-lease-renewal', {
        type: 'boolean',
        default: false,
        describe:
          "Renew the pod's Lease (named POD_NAME, in POD_NAMESPACE) every --k8s-heartbeat-duration, holder <memberID>:<clusterID>:Leader|Member (as ebr)",
      })
      .option('k8s-heartbeat-duration', {
        type: 'string',
        default: '30s',
        describe: 'How often the member lease and the EtcdMember status are renewed',
      })
      .option('enable-snapshot-lease-renewal', {
        type: 'boolean',
        default: false,
        describe:
          'After each snapshot, the full- or delta-snapshot Lease (in POD_NAMESPACE) holds its last revision (as ebr)',
      })
      .option('full-snapshot-lease-name', {
        type: 'string',
        default: 'full-snapshot-revisions',
        describe: 'Name of the full-snapshot Lease',
      })
      .option('delta-snapshot-lease-name', {
        type: 'string',
        default: 'delta-snapshot-revisions',
        describe: 'Name of the delta-snapshot Lease',
      })
      .option('etcd-member-resource', {
        type: 'boolean',
        default: false,
        describe:
          "Publish the member's status (IDs, role, revision, Ready condition) in druid's EtcdMember named POD_NAME, on change and every --k8s-heartbeat-duration",
      })
      .option('kubeconfig', {
        type: 'string',
        describe:
          "kubeconfig of the API server for leases and EtcdMember status [default: KUBECONFIG, ~/.kube/config or the pod's service account]",
      }),

  async configure(args) {
    const memberLease = args['enable-member-lease-renewal'];
    const snapshotLeases = args['enable-snapshot-lease-renewal'];
    const etcdMember = args['etcd-member-resource'];
    const heartbeatMs = requirePositive(
      parseDuration(args['k8s-heartbeat-duration'], 'k8s-heartbeat-duration'),
      'k8s-heartbeat-duration',
    );
    if (!memberLease && !snapshotLeases && !etcdMember) return undefined;
    if (snapshotLeases && !args.snapshotter) {
      throw new UsageError(
        '--enable-snapshot-lease-renewal follows the snapshots this sidecar takes: leave out --no-snapshotter, or the lease renewal',
      );
    }
    const names = { full: args['full-snapshot-lease-name'], delta: args['delta-snapshot-lease-name'] };
    if (snapshotLeases && (!names.full || !names.delta)) {
      throw new UsageError(
        '--full-snapshot-lease-name and --delta-snapshot-lease-name must not be empty with --enable-snapshot-lease-renewal',
      );
    }
    const flags = [
      memberLease && '--enable-member-lease-renewal',
      snapshotLeases && '--enable-snapshot-lease-renewal',
      etcdMember && '--etcd-member-resource',
    ].filter(Boolean);
    const pod = podIdentity(process.env, flags.join(' and '), memberLease || etcdMember);
    const { KubeClient } = await import('./kube-client.js');
    const client = KubeClient.load(args.kubeconfig);

    // The publisher first, so that it stops last, after the components that feed it.
    return async ({ leadership, snapshotter, proofRecord }, context) => {
      const { KubePublisher } = await import('./kube-publisher.js');
      const publisher = new KubePublisher(context);
      const components: Component[] = [publisher];
      const heartbeat = { client, publisher, leadership, pod, heartbeatMs };
      if (memberLease) {
        const { MemberLeaseRenewal } = await import('./member-lease-renewal.js');
        components.push(new MemberLeaseRenewal(heartbeat));
      }
      if (snapshotLeases && snapshotter) {
        const { SnapshotLeaseRenewal } = await import('./snapshot-lease-renewal.js');
        components.push(
          new SnapshotLeaseRenewal({ client, publisher, snapshots: snapshotter, namespace: pod.namespace, names }),
        );
      }
      if (etcdMember) {
        const { EtcdMemberStatusPublisher } = await import('./etcd-member-status-publisher.js');
        const { backupProvenCondition } = await import('../proof-record/backup-proven-condition.js');
        const proof = () => {
          const record = proofRecord?.();
          return record ? [backupProvenCondition(record)] : [];
        };
        components.push(new EtcdMemberStatusPublisher(heartbeat, proof));
      }
      return components;
    };
  },
};
