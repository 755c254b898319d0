import { UsageError } from '../common/index.js';

/** Where the sidecar runs, as the downward API tells it (ebr reads the same variables). */
export interface PodIdentity {
  name: string;
  namespace: string;
}

/** POD_NAME and POD_NAMESPACE; a usage error naming the missing one and how to set it. */
export function podIdentity(env: NodeJS.ProcessEnv, purpose: string): PodIdentity {
  const missing = ['POD_NAME', 'POD_NAMESPACE'].filter((name) => !env[name]);
  if (missing.length > 0) {
    throw new UsageError(
      `${purpose} needs the environment variable${missing.length > 1 ? 's' : ''} ${missing.join(' and ')}: set them from the downward API (fieldRef metadata.name and metadata.namespace)`,
    );
  }
  return { name: env.POD_NAME as string, namespace: env.POD_NAMESPACE as string };
}
