import { homedir } from 'node:os';
import { posix } from 'node:path';
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

/**
 * A store named as ebr's pods name it: `--[source-]storage-provider`, `--[source-]store-container` and
 * `--[source-]store-prefix`, with the container taken from `STORAGE_CONTAINER` (`SOURCE_STORAGE_CONTAINER` for a
 * copy's source) when the flag is not given, as etcd-druid sets it.
 */
export interface EbrStoreFlags {
  provider?: string;
  container?: string;
  prefix?: string;
  /** `--store-endpoint-override`: the S3 endpoint (an `endpoint` option of the URL). */
  endpointOverride?: string;
}

/** ebr's container for `Local` when none is given. */
const DEFAULT_LOCAL_CONTAINER = 'default.bkp';

/**
 * The store URL ebr would open for these flags and environment. ebr (v0.25 and later) keeps a `Local` store in
 * `$HOME/<container>/<prefix>`, joining the container to the home folder even when it starts with `/`; etcd-druid
 * mounts the volume there (`/home/nonroot/<container>`), so the same rule finds the same files.
 */
export function ebrStoreUrl(
  flags: EbrStoreFlags,
  env: NodeJS.ProcessEnv,
  options: { source?: boolean } = {},
): string | undefined {
  const flagPrefix = options.source ? '--source-' : '--';
  const variable = options.source ? 'SOURCE_STORAGE_CONTAINER' : 'STORAGE_CONTAINER';
  const provider = flags.provider ?? '';
  const container = flags.container || env[variable] || '';
  if (provider === '' && container === '') return undefined;
  if (provider === '' || provider.toUpperCase() === 'LOCAL') {
    // Without HOME, the home folder of the user in /etc/passwd, as Go's os.UserHomeDir and a container runtime give.
    const home = env.HOME || homedir();
    if (!home.startsWith('/')) {
      throw new UsageError(
        `${flagPrefix}storage-provider Local keeps the store under $HOME, as ebr does, but the home folder is "${home}": set HOME to an absolute path`,
      );
    }
    const dir = posix.join(home, container || DEFAULT_LOCAL_CONTAINER, flags.prefix ?? '');
    return storeUrlFromProviderFlags({ provider: 'Local', container: dir });
  }
  if (container === '') {
    throw new UsageError(
      `${flagPrefix}storage-provider ${provider} needs a bucket: give ${flagPrefix}store-container or set ${variable}`,
    );
  }
  const url = storeUrlFromProviderFlags({ provider, container, prefix: flags.prefix });
  if (flags.endpointOverride === undefined || flags.endpointOverride === '') return url;
  if (!url.startsWith('s3://')) {
    throw new UsageError(
      `${flagPrefix}store-endpoint-override is read for S3-compatible stores only; for ${provider} give the endpoint in the credentials`,
    );
  }
  return `${url}?endpoint=${encodeURIComponent(flags.endpointOverride)}`;
}
