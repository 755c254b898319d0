import { UsageError } from '../errors.js';
import { openLocalStore } from './local.js';
import { QueryOptions } from './query-options.js';
import { DEFAULT_RETRY_POLICY, RetryingStore, type RetryPolicy } from './retry.js';
import type { SnapStore } from './snapstore.js';
import { retryPolicy } from './transfer-options.js';

/** A parsed `--store` URL: provider scheme, container (bucket, or directory for file://) and prefix. */
export interface StoreLocation {
  scheme: string;
  container: string;
  prefix: string;
  url: URL;
}

export interface OpenOptions {
  /** Overrides parts of the retry policy (tests shorten the waits). */
  retry?: Partial<RetryPolicy>;
}

export type StoreOpener = (location: StoreLocation, options: OpenOptions) => Promise<SnapStore>;

/** A cloud provider: opened with the retry policy (its start-up check retries too), then wrapped in retries. */
type CloudOpener = (location: StoreLocation, policy: RetryPolicy) => Promise<SnapStore>;

// Providers load on first use: the cloud SDKs take a while to import, and a program that only uses file://
// should not pay for them.
function cloud(load: () => Promise<CloudOpener>): StoreOpener {
  return async (location, options) => {
    const policy = { ...retryPolicy(new QueryOptions(location), DEFAULT_RETRY_POLICY), ...options.retry };
    const open = await load();
    const store = await open(location, policy);
    return new RetryingStore(store, policy);
  };
}

const openers = new Map<string, StoreOpener>([
  ['file', openLocalStore],
  ['s3', cloud(async () => (await import('./s3/s3-store.js')).openS3Store)],
  ['gs', cloud(async () => (await import('./gcs/gcs-store.js')).openGcsStore)],
  ['azblob', cloud(async () => (await import('./azure/azure-store.js')).openAzureStore)],
]);

/** Providers register their URL scheme here, so adding a cloud never touches the programs. */
export function registerStoreProvider(scheme: string, opener: StoreOpener): void {
  openers.set(scheme, opener);
}

export function parseStoreUrl(raw: string): StoreLocation {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(
      `--store "${raw}" is not a URL: use file:///path, s3://bucket/prefix, gs://bucket/prefix or azblob://container/prefix`,
    );
  }
  const scheme = url.protocol.replace(/:$/, '');
  if (!openers.has(scheme)) {
    throw new UsageError(
      `--store "${redact(url)}": unknown store scheme "${scheme}:"; use one of ${[...openers.keys()].map((s) => `${s}://`).join(', ')}`,
    );
  }
  if (scheme === 'file') {
    if (url.host && url.host !== 'localhost') {
      throw new UsageError(`--store "${raw}": a file:// URL needs an absolute path, e.g. file:///var/backups/etcd`);
    }
    const location = { scheme, container: decodeURIComponent(url.pathname), prefix: '', url };
    new QueryOptions(location).allowOnly([]);
    return location;
  }
  if (!url.host) {
    throw new UsageError(`--store "${redact(url)}" names no bucket or container: use ${scheme}://NAME/prefix`);
  }
  return { scheme, container: url.host, prefix: decodeURIComponent(url.pathname).replace(/^\/+|\/+$/g, ''), url };
}

export async function openStore(raw: string, options: OpenOptions = {}): Promise<SnapStore> {
  const location = parseStoreUrl(raw);
  const opener = openers.get(location.scheme);
  if (!opener) throw new UsageError(`no provider for ${location.scheme}://`);
  return opener(location, options);
}

/** The URL without user info or query (which may carry credentials), for messages. */
export function redact(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}
