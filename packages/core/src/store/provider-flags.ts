import { UsageError } from '../common/errors.js';

/**
 * ebr selects a store with `--storage-provider`, `--store-container` and `--store-prefix`; we select it with
 * one URL. This turns the first into the second, so ebr's flags (and the manifests that use them) still work.
 */
export interface ProviderFlags {
  provider: string;
  container: string;
  prefix?: string;
}

const SCHEMES: Record<string, string> = {
  S3: 's3',
  GCS: 'gs',
  ABS: 'azblob',
  SWIFT: 'swift',
  OSS: 'oss',
  ECS: 'ecs',
  OCS: 'ocs',
  LOCAL: 'file',
};

export function storeUrlFromProviderFlags({ provider, container, prefix = '' }: ProviderFlags): string {
  const name = provider.trim().toUpperCase();
  const scheme = SCHEMES[name];
  if (!scheme) {
    throw new UsageError(
      `--storage-provider "${provider}": use one of S3, GCS, ABS, Swift, OSS, ECS, OCS, Local (or --store URL)`,
    );
  }
  if (!container) throw new UsageError(`--storage-provider ${provider} needs --store-container`);
  const path = prefix.replace(/^\/+|\/+$/g, '');
  if (scheme === 'file') {
    // ebr's Local provider keeps snapshots in <container>/<prefix>.
    const dir = [container.replace(/\/+$/, ''), path].filter(Boolean).join('/');
    if (!dir.startsWith('/'))
      throw new UsageError(`--store-container "${container}": the Local provider needs an absolute path`);
    return `file://${encodePath(dir)}`;
  }
  if (/[/?#\s]/.test(container)) {
    throw new UsageError(`--store-container "${container}" is not a bucket or container name`);
  }
  return `${scheme}://${container}${path ? `/${encodePath(path)}` : ''}`;
}

function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}
