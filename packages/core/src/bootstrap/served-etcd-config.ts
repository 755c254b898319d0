import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { errorMessage, OperationError } from '../common/errors.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import type { EtcdMember } from '../etcd/etcd-members.js';
import { clusterMembers } from '../etcd/snapshot-restore-command.js';
import {
  ADVERTISE_KEYS,
  clusterClientUrls,
  type EtcdConfigValues,
  type PodMember,
  parseEtcdConfig,
  podMember,
} from '../kubernetes/druid-etcd-config.js';
import { type ClusterState, probeCluster } from './cluster-probe.js';

/** Where etcd-druid mounts etcd's config file (the ConfigMap key etcd.conf.yaml). */
export const DRUID_ETCD_CONFIG_PATH = '/var/etcd/config/etcd.conf.yaml';

/** What /config serves and what it was made from. */
export interface ServedEtcdConfig {
  /** The YAML etcd reads with --config-file. */
  text: string;
  member: PodMember;
  initialCluster: string;
  initialClusterState: 'new' | 'existing';
  /** The data dir the file names (`data-dir`), if any. */
  dataDir?: string;
}

/**
 * `initial-cluster` as etcd must start with it: when a quorum answers, only the members the cluster lists (by
 * name, or by peer URL for a learner that never started and so has no name yet) and this one, since etcd refuses
 * an `initial-cluster` that names members the cluster does not have ("member count is unequal"). Without a
 * quorum, the file's list as it is (a new cluster, or one whose members all restart).
 */
export function trimInitialCluster(initialCluster: string, self: PodMember, members?: EtcdMember[]): string {
  const entries = clusterMembers(initialCluster);
  if (!members || members.length === 0) return initialCluster;
  const kept = entries.filter(
    (e) =>
      e.name === self.name || members.some((m) => (m.name !== '' && m.name === e.name) || m.peerUrls.includes(e.url)),
  );
  if (!kept.some((e) => e.name === self.name)) kept.push(...self.peerUrls.map((url) => ({ name: self.name, url })));
  return kept.map((e) => `${e.name}=${e.url}`).join(',');
}

/**
 * ebr's rule for `initial-cluster-state`: `new` for one member; with several, `existing` when a quorum answers
 * and a learner is in its member list (this member rejoining, or a new member of a scale-up, which
 * initialization added as a learner), else `new`. etcd reads neither this nor `initial-cluster` when its data
 * dir holds data, so a member that restarts on its own data is unaffected.
 */
export function initialClusterState(initialCluster: string, members?: EtcdMember[]): 'new' | 'existing' {
  if (clusterMembers(initialCluster).length <= 1) return 'new';
  return members?.some((m) => m.isLearner) ? 'existing' : 'new';
}

/** The file druid mounts, rewritten for this pod: its name, its URLs, the cluster as it is now. */
export function renderEtcdConfig(
  config: EtcdConfigValues,
  member: PodMember,
  cluster: ClusterState | undefined,
): ServedEtcdConfig {
  const members = cluster?.state === 'quorum' ? cluster.members : undefined;
  const initialCluster = trimInitialCluster(String(config['initial-cluster']), member, members);
  const state = initialClusterState(initialCluster, members);
  const served: EtcdConfigValues = {
    ...config,
    name: member.name,
    [ADVERTISE_KEYS.peer]: member.peerUrls.join(','),
    [ADVERTISE_KEYS.client]: member.clientUrls.join(','),
    'initial-cluster': initialCluster,
    'initial-cluster-state': state,
  };
  const dataDir = typeof config['data-dir'] === 'string' ? config['data-dir'] : undefined;
  return {
    text: yamlText(served),
    member,
    initialCluster,
    initialClusterState: state,
    ...(dataDir ? { dataDir } : {}),
  };
}

/** The config file read and checked, with this pod's member: what initialization and /config both start from. */
export async function readEtcdConfig(
  path: string,
  podName: string,
): Promise<{ config: EtcdConfigValues; member: PodMember }> {
  const text = await readFile(path, 'utf8').catch((err: unknown) => {
    throw new OperationError(
      `cannot read the etcd config file ${path} (${errorMessage(err)}): check --etcd-config-file and the ConfigMap mount`,
    );
  });
  const config = parseEtcdConfig(text, path);
  return { config, member: podMember(config, podName, path) };
}

/**
 * What /config serves: the file read, the cluster asked (with several members; through `endpoints`, or every
 * member's client URL from the file), the file rendered for this pod.
 */
export async function etcdConfigForPod(options: {
  path: string;
  podName: string;
  /** TLS and credentials for asking the cluster; its endpoints are used when given, else the file's. */
  connection: Omit<EtcdConnection, 'endpoints'> & { endpoints?: string[] };
  timeoutMs?: number;
}): Promise<ServedEtcdConfig> {
  const { config, member } = await readEtcdConfig(options.path, options.podName);
  const several = new Set(clusterMembers(String(config['initial-cluster'])).map((m) => m.name)).size > 1;
  const cluster = several
    ? await probeCluster(
        { ...options.connection, endpoints: options.connection.endpoints ?? clusterClientUrls(config, options.path) },
        options.timeoutMs,
      )
    : undefined;
  return renderEtcdConfig(config, member, cluster);
}

/**
 * YAML for etcd's config file, its library loaded on first use: only the sidecar serves a config, and loading it
 * cost every other program ~25 ms and 1.5 MB at start-up.
 */
function yamlText(values: EtcdConfigValues): string {
  const { stringify } = createRequire(import.meta.url)('yaml') as typeof import('yaml');
  return stringify(values);
}
