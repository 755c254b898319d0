import { UsageError } from '../common/errors.js';
import { readKeyFile } from '../format/encryption/encryption-keys.js';
import { EncryptedStore } from './encrypted-store.js';
import { openLocalStore } from './local.js';
import { QueryOptions } from './query-options.js';
import { DEFAULT_RETRY_POLICY, RetryingStore, type RetryPolicy } from './retry.js';
import type { SnapStore } from './snapstore.js';
import { parseStoreUrl, type StoreLocation } from './store-url.js';
import { retryPolicy } from './transfer-options.js';

export interface OpenOptions {
  /** Overrides parts of the retry policy (tests shorten the waits). */
  retry?: Partial<RetryPolicy>;
  /** Where the provider reads its credential variables (default: the process's environment). */
  env?: NodeJS.ProcessEnv;
  /** `--encryption-key-file`: snapshots put are encrypted with its first key; without it, none is (docs/encryption.md). */
  encryptionKeyFile?: string;
  /**
   * A `file://` store whose folder does not exist yet is opened as an empty store, which its first write creates:
   * for the programs that write snapshots (the sidecar, `save`, a copy's destination) and for etcd-validate, which
   * runs before the first snapshot ever was. Without it (a reader: a restore, a listing, a copy's source), a missing
   * folder is refused as a missing bucket is: read as empty, a mistyped path or an unmounted volume would pass for
   * a store with no backups, and a CronJob would report success forever.
   */
  allowMissingFolder?: boolean;
}

type StoreOpener = (location: StoreLocation, options: OpenOptions) => Promise<SnapStore>;

/** A cloud provider: opened with the retry policy (its start-up check retries too), then wrapped in retries. */
type CloudOpener = (location: StoreLocation, policy: RetryPolicy, env?: NodeJS.ProcessEnv) => Promise<SnapStore>;

// Providers load on first use: the cloud SDKs take a while to import, and a program that only uses file://
// should not pay for them.
function cloud(load: () => Promise<CloudOpener>): StoreOpener {
  return async (location, options) => {
    const policy = { ...retryPolicy(new QueryOptions(location), DEFAULT_RETRY_POLICY), ...options.retry };
    const open = await load();
    const store = await open(location, policy, options.env);
    return new RetryingStore(store, policy);
  };
}

const openers = new Map<string, StoreOpener>([
  ['file', openLocalStore],
  ['s3', cloud(async () => (await import('./s3/s3-store.js')).openS3Store)],
  ['gs', cloud(async () => (await import('./gcs/gcs-store.js')).openGcsStore)],
  ['azblob', cloud(async () => (await import('./azure/azure-store.js')).openAzureStore)],
  ['swift', cloud(async () => (await import('./swift/swift-store.js')).openSwiftStore)],
  ['oss', cloud(async () => (await import('./oss/oss-store.js')).openOssStore)],
  ['ecs', cloud(async () => (await import('./s3/s3-store.js')).openEcsStore)],
  ['ocs', cloud(async () => (await import('./s3/s3-store.js')).openOcsStore)],
]);

export async function openStore(raw: string, options: OpenOptions = {}): Promise<EncryptedStore> {
  const location = parseStoreUrl(raw);
  const opener = openers.get(location.scheme);
  if (!opener) throw new UsageError(`no provider for ${location.scheme}://`);
  const keys = options.encryptionKeyFile === undefined ? undefined : readKeyFile(options.encryptionKeyFile);
  return new EncryptedStore(await opener(location, options), keys);
}
