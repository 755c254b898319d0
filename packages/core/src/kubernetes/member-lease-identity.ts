import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { UsageError } from '../common/errors.js';

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
  // Loaded only here: the YAML parser adds to every program's start.
  const { parse } = createRequire(import.meta.url)('yaml') as typeof import('yaml');
  let config: Record<string, unknown>;
  try {
    config = parse(text) ?? {};
  } catch {
    throw new UsageError(`etcd's config file ${path} is not YAML: give etcd's config file (ETCD_CONF)`);
  }
  const prefix = typeof config['member-name-prefix'] === 'string' ? config['member-name-prefix'] : '';
  const name = prefix ? `${prefix}-${podName}` : podName;
  const peerUrls = urls(config['initial-advertise-peer-urls'], name);
  const tls = peerUrls.length > 0 && peerUrls.every((url) => url.startsWith('https://'));
  return { name, annotations: { [PEER_TLS_ANNOTATION]: String(tls) } };
}

/**
 * `initial-advertise-peer-urls` as druid writes it (a map from member name to its URLs, which etcd-wrapper turns
 * into etcd's flag) or as etcd's own config file has it (one comma-separated string).
 */
function urls(value: unknown, member: string): string[] {
  const list =
    value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)[member]
      : value;
  const all = Array.isArray(list) ? list.map(String) : typeof list === 'string' ? list.split(',') : [];
  return all.map((url) => url.trim()).filter(Boolean);
}
