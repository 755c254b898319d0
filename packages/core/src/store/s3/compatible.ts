import { UsageError } from '../../common/errors.js';
import { type CredentialEnv, readCredentials } from '../credential-files.js';
import { parseBoolean, QueryOptions } from '../query-options.js';
import type { StoreLocation } from '../store-url.js';
import { TRANSFER_OPTIONS, transferOptions } from '../transfer-options.js';
import { MIN_PART_SIZE, type S3Config } from './config.js';

/**
 * The S3-compatible stores ebr names on their own: Dell ECS (`ecs://`, keys and endpoint in ECS_* variables) and
 * OpenShift Container Storage (`ocs://`, ebr's OPENSHIFT_APPLICATION_CREDENTIALS files). Both are the S3 store
 * with these credential sources, path-style addressing as in ebr, and checksums only where S3 requires them
 * (such servers often lack the AWS SDK's newer default checksums).
 */
export const OCS_CREDENTIAL_ENV: CredentialEnv = {
  directory: 'OPENSHIFT_APPLICATION_CREDENTIALS',
  json: 'OPENSHIFT_APPLICATION_CREDENTIALS_JSON',
};
export const OCS_CREDENTIAL_FIELDS = [
  'endpoint',
  'region',
  'accessKeyID',
  'secretAccessKey',
  'disableSSL',
  'insecureSkipVerify',
] as const;

export const ECS_VARIABLES = {
  endpoint: 'ECS_ENDPOINT',
  accessKeyId: 'ECS_ACCESS_KEY_ID',
  secretAccessKey: 'ECS_SECRET_ACCESS_KEY',
  disableSSL: 'ECS_DISABLE_SSL',
  insecureSkipVerify: 'ECS_INSECURE_SKIP_VERIFY',
} as const;

/** ECS has no regions; ebr signs for this one. */
const ECS_REGION = 'US-Standard';
const QUERY_OPTIONS = ['endpoint', ...TRANSFER_OPTIONS];

export async function ecsConfig(location: StoreLocation, env: NodeJS.ProcessEnv = process.env): Promise<S3Config> {
  const where = `ecs://${location.container}/${location.prefix}`.replace(/\/$/, '');
  const missing = [ECS_VARIABLES.endpoint, ECS_VARIABLES.accessKeyId, ECS_VARIABLES.secretAccessKey].filter(
    (name) => !env[name],
  );
  const query = new QueryOptions(location).allowOnly(QUERY_OPTIONS);
  if (
    missing.length > 0 &&
    !(missing.length === 1 && missing[0] === ECS_VARIABLES.endpoint && query.string('endpoint'))
  ) {
    throw new UsageError(
      `${where}: ${missing.join(', ')} ${missing.length > 1 ? 'are' : 'is'} not set: ECS takes its endpoint and keys from ECS_* variables, as ebr does`,
    );
  }
  const flag = (name: string) => (env[name] ? parseBoolean(env[name], name) : false);
  return compatible(location, query, where, {
    endpoint: query.string('endpoint') ?? env[ECS_VARIABLES.endpoint]!,
    region: ECS_REGION,
    disableSSL: flag(ECS_VARIABLES.disableSSL),
    insecureSkipVerify: flag(ECS_VARIABLES.insecureSkipVerify),
    staticKeys: { accessKeyId: env[ECS_VARIABLES.accessKeyId]!, secretAccessKey: env[ECS_VARIABLES.secretAccessKey]! },
    credentialsHint: `check ${ECS_VARIABLES.accessKeyId} and ${ECS_VARIABLES.secretAccessKey}`,
  });
}

export async function ocsConfig(location: StoreLocation, env: NodeJS.ProcessEnv = process.env): Promise<S3Config> {
  const where = `ocs://${location.container}/${location.prefix}`.replace(/\/$/, '');
  const query = new QueryOptions(location).allowOnly(QUERY_OPTIONS);
  const credentials = await readCredentials(OCS_CREDENTIAL_ENV, OCS_CREDENTIAL_FIELDS, env);
  if (!credentials) {
    throw new UsageError(
      `${where}: no OCS credentials: set ${OCS_CREDENTIAL_ENV.directory} (a directory with endpoint, region, accessKeyID and secretAccessKey) or ${OCS_CREDENTIAL_ENV.json}`,
    );
  }
  const v = credentials.values;
  const missing = ['endpoint', 'region', 'accessKeyID', 'secretAccessKey'].filter((f) => !v[f]);
  if (missing.length > 0 && !(missing.length === 1 && missing[0] === 'endpoint' && query.string('endpoint'))) {
    throw new UsageError(`${where}: ${credentials.origin} lacks ${missing.join(', ')}`);
  }
  const flag = (name: string) => (v[name] ? parseBoolean(v[name], `${credentials.origin} ${name}`) : false);
  return {
    ...compatible(location, query, where, {
      endpoint: query.string('endpoint') ?? v.endpoint,
      region: v.region,
      disableSSL: flag('disableSSL'),
      insecureSkipVerify: flag('insecureSkipVerify'),
      credentialsHint: `check ${OCS_CREDENTIAL_ENV.directory} / ${OCS_CREDENTIAL_ENV.json}`,
    }),
    credentials,
    credentialNames: { env: OCS_CREDENTIAL_ENV, fields: OCS_CREDENTIAL_FIELDS },
  };
}

interface Settings {
  endpoint: string;
  region: string;
  disableSSL: boolean;
  insecureSkipVerify: boolean;
  staticKeys?: S3Config['staticKeys'];
  credentialsHint: string;
}

function compatible(location: StoreLocation, query: QueryOptions, where: string, s: Settings): S3Config {
  // As ebr: an endpoint without a scheme is https, or http with disableSSL; disableSSL also turns https into http.
  const withScheme = /^https?:\/\//.test(s.endpoint) ? s.endpoint : `https://${s.endpoint}`;
  const endpoint = s.disableSSL ? withScheme.replace(/^https:/, 'http:') : withScheme;
  if (!/^https?:\/\/[^/\s]+/.test(endpoint)) {
    throw new UsageError(`${where}: endpoint "${s.endpoint}" is not a host or an http(s) URL`);
  }
  return {
    bucket: location.container,
    prefix: location.prefix,
    location: where,
    region: s.region,
    endpoint,
    forcePathStyle: true,
    requestChecksum: 'WHEN_REQUIRED',
    responseChecksum: 'WHEN_REQUIRED',
    tls: { insecureSkipVerify: s.insecureSkipVerify },
    transfer: transferOptions(query, { min: MIN_PART_SIZE }, where),
    staticKeys: s.staticKeys,
    credentialsHint: s.credentialsHint,
  };
}
