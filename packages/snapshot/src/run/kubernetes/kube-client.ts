import { UsageError } from '@etcd-steward/core/common';
import {
  ConflictError,
  ETCD_MEMBER_GROUP,
  ETCD_MEMBER_PLURAL,
  ETCD_MEMBER_VERSION,
  type EtcdMemberResource,
  type Lease,
  type ObjectApi,
} from '@etcd-steward/core/kubernetes';
import {
  ApiException,
  CoordinationV1Api,
  CustomObjectsApi,
  KubeConfig,
  type V1Lease,
  V1MicroTime,
} from '@kubernetes/client-node';

/**
 * The API server as `@kubernetes/client-node` reaches it (a kubeconfig, or the pod's service account), seen as
 * core's ObjectApi: a 404 is "none", a 409 a ConflictError.
 */
export class KubeClient {
  private readonly coordination: CoordinationV1Api;
  private readonly custom: CustomObjectsApi;

  private constructor(config: KubeConfig) {
    this.coordination = config.makeApiClient(CoordinationV1Api);
    this.custom = config.makeApiClient(CustomObjectsApi);
  }

  /** `--kubeconfig`, else KUBECONFIG, ~/.kube/config or the in-cluster service account; a usage error if none. */
  static load(kubeconfig: string | undefined): KubeClient {
    const config = new KubeConfig();
    try {
      if (kubeconfig === undefined) config.loadFromDefault();
      else config.loadFromFile(kubeconfig);
    } catch (err) {
      throw new UsageError(
        `--kubeconfig ${kubeconfig}: cannot load it (${(err as Error).message}); give a readable kubeconfig file`,
      );
    }
    const cluster = config.getCurrentCluster();
    // loadFromDefault falls back to http://localhost:8080 when it finds nothing: not a cluster anyone means.
    if (!cluster || (kubeconfig === undefined && !process.env.KUBECONFIG && cluster.name === 'cluster')) {
      throw new UsageError(
        'no Kubernetes API server is configured: run in a pod with a service account, or give --kubeconfig',
      );
    }
    return new KubeClient(config);
  }

  lease(name: string, namespace: string): ObjectApi<Lease> {
    const api = this.coordination;
    return {
      read: () => orNone(api.readNamespacedLease({ name, namespace })),
      create: (body) => orConflict(api.createNamespacedLease({ namespace, body: wireLease(body) })),
      replace: (body) => orConflict(api.replaceNamespacedLease({ name, namespace, body: wireLease(body) })),
    };
  }

  /**
   * druid's EtcdMember. Its status is a subresource: a create carries the object alone and the status follows
   * as an update of /status, as the API server ignores a status sent with the object.
   */
  etcdMember(name: string, namespace: string): ObjectApi<EtcdMemberResource> {
    const where = { group: ETCD_MEMBER_GROUP, version: ETCD_MEMBER_VERSION, namespace, plural: ETCD_MEMBER_PLURAL };
    const replaceStatus = (body: EtcdMemberResource) =>
      orConflict<EtcdMemberResource>(this.custom.replaceNamespacedCustomObjectStatus({ ...where, name, body }));
    return {
      read: () => orNone<EtcdMemberResource>(this.custom.getNamespacedCustomObject({ ...where, name })),
      create: async (body) => {
        const { status, ...object } = body;
        const created = await orConflict<EtcdMemberResource>(
          this.custom.createNamespacedCustomObject({ ...where, body: object }),
        );
        return replaceStatus({ ...created, status });
      },
      replace: replaceStatus,
    };
  }
}

/** The API server reads a lease's times as MicroTime (six fraction digits) and refuses a plain Date's three. */
function wireLease(lease: Lease): V1Lease {
  const spec = lease.spec;
  const renewTime = spec?.renewTime && new V1MicroTime(spec.renewTime.getTime());
  return { ...lease, spec: spec && { ...spec, renewTime } } as V1Lease;
}

async function orNone<T>(request: Promise<T>): Promise<T | undefined> {
  try {
    return await request;
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return undefined;
    throw new Error(apiError(err));
  }
}

async function orConflict<T>(request: Promise<T>): Promise<T> {
  try {
    return await request;
  } catch (err) {
    if (err instanceof ApiException && err.code === 409) throw new ConflictError();
    throw new Error(apiError(err));
  }
}

/** The status and the server's own message: the client's message also carries every response header. */
function apiError(err: unknown): string {
  if (!(err instanceof ApiException)) return (err as Error).message;
  const body = typeof err.body === 'string' ? safeParse(err.body) : err.body;
  return `the API server answered ${err.code}${body?.message ? `: ${body.message}` : ''}`;
}

function safeParse(text: string): { message?: string } | undefined {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
