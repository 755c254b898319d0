import { UsageError } from '../../common/errors.js';
import { type CredentialEnv, type CredentialSource, readCredentials } from '../credential-files.js';
import { parseBoolean, QueryOptions } from '../query-options.js';
import type { StoreLocation } from '../store-url.js';
import { TRANSFER_OPTIONS, type TransferOptions, transferOptions } from '../transfer-options.js';

/**
 * Everything an S3 store needs, from (highest first) the URL's query, ebr's credential files, the AWS SDK's
 * own environment (AWS_REGION, AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_PROFILE, ...) and defaults.
 * docs/stores.md lists every option.
 */
export interface S3Config {
  bucket: string;
  prefix: string;
  /** `s3://bucket/prefix`, for messages. */
  location: string;
  region?: string;
  endpoint?: string;
  forcePathStyle: boolean;
  requestChecksum: Checksum;
  responseChecksum: Checksum;
  /** Server-side encryption with S3 or KMS keys. */
  sse?: { type: 'AES256' } | { type: 'aws:kms'; kmsKeyId?: string };
  /** SSE-C: the key comes from the credentials files only, never from the URL. */
  sseCustomer?: { algorithm: string; key: string };
  /** `ca`: PEM certificates to trust besides the system's (ebr's trustedCaCert). */
  tls: { ca?: string; insecureSkipVerify: boolean };
  transfer: TransferOptions;
  /** ebr's credential files, if any: keys are re-read from them when they change. */
  credentials?: CredentialSource;
  /** The variables that name those files and the fields they hold (AWS's; OCS has its own). */
  credentialNames?: { env: CredentialEnv; fields: readonly string[] };
  /** Keys given as variables (ECS): used as they are. */
  staticKeys?: { accessKeyId: string; secretAccessKey: string };
  /** Where to look when the keys are refused, for messages. */
  credentialsHint: string;
}

export type Checksum = 'WHEN_SUPPORTED' | 'WHEN_REQUIRED';

export const AWS_CREDENTIAL_ENV: CredentialEnv = {
  directory: 'AWS_APPLICATION_CREDENTIALS',
  json: 'AWS_APPLICATION_CREDENTIALS_JSON',
};

/** The names ebr uses, as files in the directory and as JSON fields. */
export const AWS_CREDENTIAL_FIELDS = [
  'accessKeyID',
  'secretAccessKey',
  'region',
  'endpoint',
  's3ForcePathStyle',
  'insecureSkipVerify',
  'trustedCaCert',
  'sseCustomerKey',
  'sseCustomerAlgorithm',
  'requestChecksumCalculation',
  'responseChecksumValidation',
  'roleARN',
] as const;

export const QUERY_OPTIONS = [
  'endpoint',
  'region',
  'forcePathStyle',
  'requestChecksum',
  'responseChecksum',
  'sse',
  'sseKmsKeyId',
  ...TRANSFER_OPTIONS,
];

/** S3 refuses parts under 5 MiB (except the last). */
export const MIN_PART_SIZE = 5 * 1024 * 1024;

export async function s3Config(location: StoreLocation, env: NodeJS.ProcessEnv = process.env): Promise<S3Config> {
  const where = `s3://${location.container}/${location.prefix}`;
  const query = new QueryOptions(location).allowOnly(QUERY_OPTIONS);
  const credentials = await readCredentials(AWS_CREDENTIAL_ENV, AWS_CREDENTIAL_FIELDS, env);
  const file = credentials?.values ?? {};
  if (file.roleARN) {
    throw new UsageError(
      `${where}: ${credentials!.origin} names a roleARN; web identity is read by the AWS SDK itself: ` +
        'set AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE instead',
    );
  }
  if (credentials && (!file.accessKeyID || !file.secretAccessKey)) {
    throw new UsageError(`${where}: ${credentials.origin} lacks accessKeyID or secretAccessKey`);
  }

  const endpoint = query.string('endpoint') ?? file.endpoint ?? env.AWS_ENDPOINT_URL_S3 ?? env.AWS_ENDPOINT_URL;
  if (endpoint !== undefined && !/^https?:\/\/[^/]+/.test(endpoint)) {
    throw new UsageError(`${where}: endpoint "${endpoint}" is not an http(s) URL, e.g. https://minio.example:9000`);
  }
  const pathStyleEnv = env.AWS_S3_FORCE_PATH_STYLE;
  const forcePathStyle =
    query.boolean('forcePathStyle') ??
    (file.s3ForcePathStyle !== undefined
      ? parseBoolean(file.s3ForcePathStyle, `${credentials!.origin} s3ForcePathStyle`)
      : undefined) ??
    (pathStyleEnv ? parseBoolean(pathStyleEnv, 'AWS_S3_FORCE_PATH_STYLE') : undefined) ??
    // S3-compatible servers (MinIO, Ceph, test servers) mostly need path style; AWS itself does not.
    endpoint !== undefined;

  const region = query.string('region') ?? file.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  const checksum = (name: string, fileValue: string | undefined, envValue: string | undefined): Checksum => {
    const value = query.oneOf(name, ['when_supported', 'when_required']) ?? fileValue ?? envValue ?? 'when_supported';
    const upper = value.toUpperCase();
    if (upper !== 'WHEN_SUPPORTED' && upper !== 'WHEN_REQUIRED') {
      throw new UsageError(`${where}: ${name} "${value}" must be when_supported or when_required`);
    }
    return upper;
  };

  const sseType = query.oneOf('sse', ['AES256', 'aws:kms']);
  const kmsKeyId = query.string('sseKmsKeyId');
  if (kmsKeyId && sseType !== 'aws:kms') throw new UsageError(`${where}: sseKmsKeyId needs sse=aws:kms`);
  if (file.sseCustomerKey && sseType) {
    throw new UsageError(
      `${where}: choose one encryption: sse=${sseType} or the sseCustomerKey of ${credentials!.origin}`,
    );
  }

  return {
    bucket: location.container,
    prefix: location.prefix,
    location: where.replace(/\/$/, ''),
    region: region ?? (endpoint !== undefined ? 'us-east-1' : undefined),
    endpoint,
    forcePathStyle,
    requestChecksum: checksum('requestChecksum', file.requestChecksumCalculation, env.AWS_REQUEST_CHECKSUM_CALCULATION),
    responseChecksum: checksum(
      'responseChecksum',
      file.responseChecksumValidation,
      env.AWS_RESPONSE_CHECKSUM_VALIDATION,
    ),
    sse: sseType === 'aws:kms' ? { type: 'aws:kms', kmsKeyId } : sseType ? { type: 'AES256' } : undefined,
    sseCustomer: file.sseCustomerKey
      ? { algorithm: file.sseCustomerAlgorithm || 'AES256', key: file.sseCustomerKey }
      : undefined,
    tls: {
      ca: file.trustedCaCert || undefined,
      insecureSkipVerify: file.insecureSkipVerify ? parseBoolean(file.insecureSkipVerify, 'insecureSkipVerify') : false,
    },
    transfer: transferOptions(query, { min: MIN_PART_SIZE }, where),
    credentials,
    credentialNames: { env: AWS_CREDENTIAL_ENV, fields: AWS_CREDENTIAL_FIELDS },
    credentialsHint: `check ${AWS_CREDENTIAL_ENV.directory} / ${AWS_CREDENTIAL_ENV.json}, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`,
  };
}

/** The server-side encryption (S3 or KMS keys) an upload of this store asks for, as request parameters. */
export function encryptionParams(config: Pick<S3Config, 'sse'>) {
  const { sse } = config;
  return {
    ...(sse && { ServerSideEncryption: sse.type }),
    ...(sse?.type === 'aws:kms' && { SSEKMSKeyId: sse.kmsKeyId }),
  };
}
