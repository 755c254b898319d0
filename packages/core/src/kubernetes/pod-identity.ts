import { UsageError } from '../common/index.js';

/** Where the sidecar runs, as the downward API tells it (ebr reads the same variables). */
export interface PodIdentity {
  /** Names the pod's own objects (member lease, EtcdMember); empty when nothing needs it. */
  name: string;
  namespace: string;
}

/**
 * POD_NAMESPACE, and POD_NAME when `nameNeeded`; a usage error naming what is missing, for what, and how to set it.
 */
export function podIdentity(env: NodeJS.ProcessEnv, purpose: string, nameNeeded: boolean): PodIdentity {
  const missing = [nameNeeded && 'POD_NAME', 'POD_NAMESPACE'].filter((name): name is string => !!name && !env[name]);
  if (missing.length > 0) {
    throw new UsageError(
      `${purpose} needs the environment variable${missing.length > 1 ? 's' : ''} ${missing.join(' and ')}: set ${missing.length > 1 ? 'them' : 'it'} from the downward API (fieldRef ${missing.map((m) => (m === 'POD_NAME' ? 'metadata.name' : 'metadata.namespace')).join(' and ')})`,
    );
  }
  return { name: env.POD_NAME ?? '', namespace: env.POD_NAMESPACE as string };
}
