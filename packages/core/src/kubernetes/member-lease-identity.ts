import { readFile } from 'node:fs/promises';
import { UsageError } from '../common/errors.js';
import { ADVERTISE_KEYS, advertiseUrls, etcdConfigValues, memberName } from './druid-etcd-config.js';

/** Where etcd-druid mounts etcd's config file (the ConfigMap key etcd.conf.yaml); `ETCD_CONF` names another. */
export const ETCD_CONFIG_FILE = '/var/etcd/config/etcd.conf.yaml';

/** The annotation druid reads on every member Lease before it turns peer TLS on (or off). */
export const PEER_TLS_ANNOTATION = 'member.etcd.gardener.cloud/tls-enabled';

/** The member Lease as druid names and reads it: its name and the annotations the sidecar keeps on it. */
export interface MemberLeaseIdentity {
  name: string;
  annotations: Record<string, string>;
}

/**
 * druid names a member's Lease `<member name prefix>-<pod name>` when the Etcd has a member name prefix (which it
 * writes into etcd's config file as `member-name-prefix`), else after the pod; and it waits, before changing peer
 * TLS, until every member Lease says in `member.etcd.gardener.cloud/tls-enabled` whether all of the member's
 * `initial-advertise-peer-urls` are https. Both are read from etcd's config file, as ebr reads them; without the
 * file (not under druid), the name is the pod's and the annotation says false, as druid reads a missing one.
 */
export async function memberLeaseIdentity(podName: string, env: NodeJS.ProcessEnv): Promise<MemberLeaseIdentity> {
  const path = env.ETCD_CONF || ETCD_CONFIG_FILE;
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !env.ETCD_CONF) {
      return { name: podName, annotations: { [PEER_TLS_ANNOTATION]: 'false' } };
    }
    throw new UsageError(`etcd's config file ${path} (ETCD_CONF): cannot read it (${(err as Error).message})`);
  }
  const source = `etcd's config file ${path} (ETCD_CONF)`;
  const config = etcdConfigValues(text, source);
  const name = memberName(config, podName);
  const peerUrls =
    config[ADVERTISE_KEYS.peer] === undefined ? [] : advertiseUrls(config, ADVERTISE_KEYS.peer, name, podName, source);
  const tls = peerUrls.length > 0 && peerUrls.every((url) => url.startsWith('https://'));
  return { name, annotations: { [PEER_TLS_ANNOTATION]: String(tls) } };
}
