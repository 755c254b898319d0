import { UsageError } from '../../common/errors.js';
import { type CredentialEnv, type CredentialSource, readCredentials } from '../credential-files.js';
import { QueryOptions } from '../query-options.js';
import type { StoreLocation } from '../store-url.js';
import { TRANSFER_OPTIONS, type TransferOptions, transferOptions } from '../transfer-options.js';

/**
 * Everything an Alibaba Cloud OSS store needs, from (highest first) the URL's query, ebr's credential files
 * (ALICLOUD_APPLICATION_CREDENTIALS: storageEndpoint, accessKeyID, accessKeySecret) and the variables of Alibaba
 * Cloud's own tools (ALIBABA_CLOUD_ACCESS_KEY_ID/SECRET). docs/stores.md lists every name.
 */
export interface OssConfig {
  bucket: string;
  prefix: string;
  /** `oss://bucket/prefix`, for messages. */
  location: string;
  /** e.g. https://oss-eu-central-1.aliyuncs.com; http only when the endpoint says so. */
  endpoint: string;
  transfer: TransferOptions;
  /** ebr's credential files, if any: keys are re-read from them when they change. */
  credentials?: CredentialSource;
  keys: { accessKeyId: string; accessKeySecret: string };
  /** Where the keys came from, for messages. */
  origin: string;
}

export const ALICLOUD_CREDENTIAL_ENV: CredentialEnv = {
  directory: 'ALICLOUD_APPLICATION_CREDENTIALS',
  json: 'ALICLOUD_APPLICATION_CREDENTIALS_JSON',
};
export const ALICLOUD_CREDENTIAL_FIELDS = ['storageEndpoint', 'accessKeyID', 'accessKeySecret'] as const;

const QUERY_OPTIONS = ['endpoint', ...TRANSFER_OPTIONS];
/** OSS refuses parts under 100 KiB (except the last). */
const MIN_PART_SIZE = 100 * 1024;

export async function ossConfig(location: StoreLocation, env: NodeJS.ProcessEnv = process.env): Promise<OssConfig> {
  const where = `oss://${location.container}/${location.prefix}`.replace(/\/$/, '');
  if (!/^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/.test(location.container)) {
    throw new UsageError(
      `${where}: "${location.container}" is not an OSS bucket name (3 to 63 lower-case letters, digits and "-")`,
    );
  }
  const query = new QueryOptions(location).allowOnly(QUERY_OPTIONS);
  const transfer = transferOptions(query, { min: MIN_PART_SIZE }, where);
  const credentials = await readCredentials(ALICLOUD_CREDENTIAL_ENV, ALICLOUD_CREDENTIAL_FIELDS, env);
  const values = credentials?.values ?? {};
  const origin = credentials?.origin ?? 'ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET';
  const accessKeyId = values.accessKeyID ?? (credentials ? undefined : env.ALIBABA_CLOUD_ACCESS_KEY_ID);
  const accessKeySecret = values.accessKeySecret ?? (credentials ? undefined : env.ALIBABA_CLOUD_ACCESS_KEY_SECRET);
  if (!accessKeyId || !accessKeySecret) {
    const from = credentials
      ? `${credentials.origin} lacks accessKeyID or accessKeySecret`
      : 'no OSS credentials found';
    throw new UsageError(
      `${where}: ${from}: set ${ALICLOUD_CREDENTIAL_ENV.directory} (a directory with storageEndpoint, accessKeyID and accessKeySecret), ${ALICLOUD_CREDENTIAL_ENV.json}, or ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET`,
    );
  }
  const given = query.string('endpoint') ?? values.storageEndpoint;
  if (!given) {
    throw new UsageError(
      `${where}: no endpoint: put storageEndpoint into ${credentials?.origin ?? ALICLOUD_CREDENTIAL_ENV.directory}, or add ?endpoint=https://oss-<region>.aliyuncs.com to --store`,
    );
  }
  // ebr's Secrets give the endpoint without a scheme, e.g. oss-eu-central-1.aliyuncs.com: that means https.
  const endpoint = /^https?:\/\//.test(given) ? given : `https://${given}`;
  if (!/^https?:\/\/[^/\s]+\/?$/.test(endpoint)) {
    throw new UsageError(
      `${where}: endpoint "${given}" is not a host or an http(s) URL, e.g. oss-eu-central-1.aliyuncs.com`,
    );
  }
  return {
    bucket: location.container,
    prefix: location.prefix,
    location: where,
    endpoint: endpoint.replace(/\/$/, ''),
    transfer,
    credentials,
    keys: { accessKeyId, accessKeySecret },
    origin,
  };
}
