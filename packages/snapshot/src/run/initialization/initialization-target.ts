import { stat } from 'node:fs/promises';
import { UsageError } from '@etcd-steward/core/common';
import { clusterMembers, type EtcdConnection, type MemberConfig } from '@etcd-steward/core/etcd';

/** What initialization and /config are set up with (the initialization flags). */
export interface InitializationSettings {
  /** --etcd-config-file: etcd's config file as druid mounts it; used when it exists. */
  etcdConfigFile: string;
  /** --data-dir; else the config file's `data-dir`. */
  dataDir?: string;
  /** The member flags, for a sidecar without the config file. */
  member: MemberConfig;
  /** --service-endpoints: where the cluster is asked; else every member's client URL from the config file. */
  serviceEndpoints?: string[];
  /** TLS and credentials for etcd (the sidecar's own connection). */
  connection: EtcdConnection;
}

/** The member an initialization is for, its data dir, and (with several members) where to ask the cluster. */
export interface InitializationTarget {
  dataDir: string;
  member: MemberConfig;
  cluster?: EtcdConnection;
}

/**
 * Read at every initialization, as ebr reads the file at every call: druid rewrites the ConfigMap when the
 * cluster is scaled. With the config file, the member is POD_NAME's; without it, the member flags'.
 */
export async function initializationTarget(
  settings: InitializationSettings,
  podName = process.env.POD_NAME ?? '',
): Promise<InitializationTarget> {
  const present = await stat(settings.etcdConfigFile).then(
    () => true,
    (err: NodeJS.ErrnoException) => err.code !== 'ENOENT',
  );
  if (present) {
    const { readEtcdConfig } = await import('@etcd-steward/core/bootstrap');
    const { clusterClientUrls, memberConfig } = await import('@etcd-steward/core/kubernetes');
    const { config, member } = await readEtcdConfig(settings.etcdConfigFile, podName);
    const fileDataDir = typeof config['data-dir'] === 'string' ? config['data-dir'] : undefined;
    const dataDir = settings.dataDir ?? fileDataDir;
    if (!dataDir) {
      throw new UsageError(
        `${settings.etcdConfigFile} names no data-dir and the sidecar has no --data-dir: give one of them, so that initialization can check etcd's data`,
      );
    }
    const target: InitializationTarget = { dataDir, member: memberConfig(config, member) };
    if (distinctMembers(target.member.initialCluster) > 1) {
      target.cluster = {
        ...settings.connection,
        endpoints: settings.serviceEndpoints ?? clusterClientUrls(config, settings.etcdConfigFile),
      };
    }
    return target;
  }
  if (!settings.dataDir) {
    throw new UsageError(
      `the sidecar has no --data-dir and there is no etcd config file at ${settings.etcdConfigFile} (--etcd-config-file): give one of them, so that initialization can check etcd's data`,
    );
  }
  const target: InitializationTarget = { dataDir: settings.dataDir, member: settings.member };
  if (distinctMembers(settings.member.initialCluster) > 1) {
    if (!settings.serviceEndpoints) throw serviceEndpointsNeeded(settings.etcdConfigFile);
    target.cluster = { ...settings.connection, endpoints: settings.serviceEndpoints };
  }
  return target;
}

/** Members, not URLs: druid lists a member once a peer URL. */
export function distinctMembers(initialCluster: string): number {
  return new Set(clusterMembers(initialCluster).map((m) => m.name)).size;
}

/** Several members in --initial-cluster and no config file: nothing says where the cluster is. */
export function serviceEndpointsNeeded(etcdConfigFile: string): UsageError {
  return new UsageError(
    `--initial-cluster names several members and there is no etcd config file at ${etcdConfigFile} (--etcd-config-file): give --service-endpoints (client URLs that reach the other members), so that initialization can ask the cluster`,
  );
}
