/**
 * A Kubernetes object's key as kube-apiserver writes it (with its default `--etcd-prefix /registry`):
 * `/registry/<resource>/<namespace>/<name>`, or `/registry/<resource>/<name>` for a cluster-scoped one. Resources of an
 * API group other than the core and built-in ones (custom resources, APIServices) go one level deeper,
 * `/registry/<group>/<resource>/…`; a group name holds a dot and a resource name does not, which tells them apart.
 */
export interface KubernetesKey {
  /** `pods`; with its group when the key names one: `prometheuses.monitoring.coreos.com`. */
  resource: string;
  /** Absent for a cluster-scoped object. */
  namespace?: string;
  name: string;
}

const PREFIX = '/registry/';

/** The object a key names, or undefined when the key is not one kube-apiserver writes that way. */
export function kubernetesKey(key: string): KubernetesKey | undefined {
  if (!key.startsWith(PREFIX)) return undefined;
  const parts = key.slice(PREFIX.length).split('/');
  if (parts.some((p) => p === '')) return undefined;
  let resource = parts[0];
  let rest = parts.slice(1);
  if (resource.includes('.') && rest.length >= 2) {
    resource = `${rest[0]}.${parts[0]}`;
    rest = rest.slice(1);
  }
  if (rest.length === 1) return { resource, name: rest[0] };
  if (rest.length === 2) return { resource, namespace: rest[0], name: rest[1] };
  return undefined;
}
