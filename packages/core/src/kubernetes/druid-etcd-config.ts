import { createRequire } from 'node:module';
import { UsageError } from '../common/errors.js';
import { clusterMembers, type MemberConfig } from '../etcd/snapshot-restore-command.js';

/** etcd's config file as etcd-druid renders it into the pod (docs/etcd-wrapper.md, The config file): its keys as read. */
export type EtcdConfigValues = Record<string, unknown>;

/** This pod's member, read from druid's config file. */
export interface PodMember {
  /** `member-name-prefix`-`POD_NAME`, or `POD_NAME` alone. */
  name: string;
  peerUrls: string[];
  clientUrls: string[];
}

/** The two advertise-URL keys, each in one of druid's two formats. */
export const ADVERTISE_KEYS = {
  peer: 'initial-advertise-peer-urls',
  client: 'advertise-client-urls',
} as const;

/**
 * Reads the file's YAML into its keys. A file that is not a YAML map, or lacks what the served file is built
 * from (`initial-cluster`, the two advertise-URL keys), is refused with what is wrong.
 */
export function parseEtcdConfig(text: string, source: string): EtcdConfigValues {
  const config = etcdConfigValues(text, source);
  if (typeof config['initial-cluster'] !== 'string' || clusterMembers(config['initial-cluster']).length === 0) {
    throw new UsageError(`${source} has no initial-cluster: etcd's config file names the cluster's members there`);
  }
  for (const key of Object.values(ADVERTISE_KEYS)) {
    if (config[key] === undefined) throw new UsageError(`${source} has no ${key}`);
  }
  return config;
}

/** The file's YAML map of settings, whatever it holds; anything else is refused. */
export function etcdConfigValues(text: string, source: string): EtcdConfigValues {
  // Loaded only here: the YAML parser adds to every program's start.
  const { parse } = createRequire(import.meta.url)('yaml') as typeof import('yaml');
  let values: unknown;
  try {
    values = parse(text);
  } catch (err) {
    throw new UsageError(`${source} is not YAML (${(err as Error).message}): give the etcd config file druid mounts`);
  }
  if (values === null || typeof values !== 'object' || Array.isArray(values)) {
    throw new UsageError(
      `${source} does not hold a YAML map of etcd's settings: give the etcd config file druid mounts`,
    );
  }
  return values as EtcdConfigValues;
}

/** The member name etcd-druid gives a pod: with `member-name-prefix`, `<prefix>-<pod>`. */
export function memberName(config: EtcdConfigValues, podName: string): string {
  const prefix = config['member-name-prefix'];
  return typeof prefix === 'string' && prefix !== '' ? `${prefix}-${podName}` : podName;
}

/** This pod's name and advertise URLs, in whichever of druid's formats the file holds them. */
export function podMember(config: EtcdConfigValues, podName: string, source: string): PodMember {
  if (!podName) throw new UsageError('POD_NAME is not set: the served etcd config is made for the pod it names');
  const name = memberName(config, podName);
  return {
    name,
    peerUrls: advertiseUrls(config, ADVERTISE_KEYS.peer, name, podName, source),
    clientUrls: advertiseUrls(config, ADVERTISE_KEYS.client, name, podName, source),
  };
}

/**
 * One advertise key for one member. druid wrote it in two shapes over time: until 2024 a template string
 * `<scheme>@<peer service>@<namespace>@<port>` for every member alike (the pod's URL is
 * `<scheme>://<pod>.<service>.<namespace>.svc:<port>`), since then a map from member name to that member's URLs.
 * A plain comma-separated URL list (a config file written by hand) is taken as it is.
 */
export function advertiseUrls(
  config: EtcdConfigValues,
  key: string,
  member: string,
  podName: string,
  source: string,
): string[] {
  const value = config[key];
  let urls: unknown[];
  if (typeof value === 'string' && !value.includes('://')) {
    const template = parseUrlTemplate(value, key, source);
    urls = [`${template.scheme}://${podName}.${template.service}.${template.namespace}.svc:${template.port}`];
  } else if (typeof value === 'string') {
    urls = value.split(',').map((u) => u.trim());
  } else if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const entry = (value as Record<string, unknown>)[member];
    if (entry === undefined) {
      throw new UsageError(
        `${source}: ${key} has no URLs for member ${member} (it names ${Object.keys(value).join(', ') || 'none'}): check POD_NAME and member-name-prefix`,
      );
    }
    urls = Array.isArray(entry) ? entry : [entry];
  } else {
    throw new UsageError(
      `${source}: ${key} is neither druid's <scheme>@<service>@<namespace>@<port> nor a map of members`,
    );
  }
  if (urls.length === 0) throw new UsageError(`${source}: ${key} has no URLs for member ${member}`);
  return urls.map((url) => checkedUrl(url, key, source));
}

/** Every member's client URLs, to ask the cluster through before this member's etcd runs. */
export function clusterClientUrls(config: EtcdConfigValues, source: string): string[] {
  const value = config[ADVERTISE_KEYS.client];
  if (typeof value === 'string' && !value.includes('://')) {
    const t = parseUrlTemplate(value, ADVERTISE_KEYS.client, source);
    // The older druid named members after their pods (it had no member-name-prefix).
    const names = [...new Set(clusterMembers(String(config['initial-cluster'])).map((m) => m.name))];
    return names.map((pod) => `${t.scheme}://${pod}.${t.service}.${t.namespace}.svc:${t.port}`);
  }
  if (typeof value === 'string')
    return value.split(',').map((u) => checkedUrl(u.trim(), ADVERTISE_KEYS.client, source));
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    return Object.values(value as Record<string, unknown>)
      .flatMap((urls) => (Array.isArray(urls) ? urls : [urls]))
      .map((url) => checkedUrl(url, ADVERTISE_KEYS.client, source));
  }
  throw new UsageError(`${source}: ${ADVERTISE_KEYS.client} is neither druid's template nor a map of members`);
}

function parseUrlTemplate(value: string, key: string, source: string) {
  const [scheme, service, namespace, port] = value.split('@');
  if (!scheme || !service || !namespace || !port || !/^(https?)$/.test(scheme) || !/^\d{1,5}$/.test(port)) {
    throw new UsageError(
      `${source}: ${key} "${value}" is not druid's <scheme>@<service>@<namespace>@<port> (e.g. http@etcd-main-peer@shoot--x@2380)`,
    );
  }
  return { scheme, service, namespace, port };
}

function checkedUrl(url: unknown, key: string, source: string): string {
  if (typeof url === 'string') {
    try {
      const parsed = new URL(url);
      if ((parsed.protocol === 'http:' || parsed.protocol === 'https:') && parsed.hostname) return url;
    } catch {}
  }
  throw new UsageError(`${source}: ${key} holds ${JSON.stringify(url)}, which is not an http(s) URL`);
}

/** What etcd's restore tool and a rejoin need of this member, from the file (the cluster's list untrimmed). */
export function memberConfig(config: EtcdConfigValues, member: PodMember): MemberConfig {
  const token = config['initial-cluster-token'];
  return {
    name: member.name,
    initialCluster: String(config['initial-cluster']),
    // etcd's own default, when the file names none
    initialClusterToken: typeof token === 'string' && token !== '' ? token : 'etcd-cluster',
    initialAdvertisePeerUrls: member.peerUrls.join(','),
  };
}
