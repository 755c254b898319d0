/**
 * Where snapshots live: one SnapStore interface, a provider a folder (local, S3 with ECS and OCS, GCS, Azure, Swift,
 * OSS), URLs and ebr's flags, retries as a wrapper, stored digests.
 * May use: common/, format/.
 */
export type { AzureStore } from './azure/azure-store.js';
export { EncryptedStore, METADATA_ENCRYPTION_KEY_ID, wasDecrypted } from './encrypted-store.js';
export type { GcsStore } from './gcs/gcs-store.js';
export { cleanupIncompleteUploads } from './incomplete-uploads.js';
export { LocalStore } from './local.js';
export { type OpenOptions, openStore } from './location.js';
export { checkMetadata } from './metadata.js';
export type { OssStore } from './oss/oss-store.js';
export { type EbrStoreFlags, ebrStoreUrl, type ProviderFlags, storeUrlFromProviderFlags } from './provider-flags.js';
export { DEFAULT_RETRY_POLICY, isTransient, RetryingStore, type RetryPolicy } from './retry.js';
// The cloud providers load lazily through openStore(); their classes are exported as types only, so that
// importing core does not import three SDKs.
export type { S3Store } from './s3/s3-store.js';
export * from './snapstore.js';
export * from './source-credentials.js';
export * from './store-file.js';
export * from './store-url.js';
export * from './stored-digest.js';
export type { SwiftStore } from './swift/swift-store.js';
