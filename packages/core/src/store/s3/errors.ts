import { S3ServiceException } from '@aws-sdk/client-s3';
import { errorMessage, OperationError, StewardError, UsageError } from '../../common/errors.js';
import { statusOf } from '../retry.js';
import { AWS_CREDENTIAL_ENV, type S3Config } from './config.js';

/** S3 error codes that mean the configuration is wrong, with what to do about each. */
const CONFIG_FIXES: Record<string, (c: S3Config) => string> = {
  NoSuchBucket: (c) => `bucket "${c.bucket}" does not exist: create it, or fix the bucket in --store`,
  InvalidAccessKeyId: (c) => `the access key was refused: ${c.credentialsHint}`,
  SignatureDoesNotMatch: (c) => `the secret key does not match the access key: ${c.credentialsHint}`,
  InvalidToken: (c) => `the session token was refused: ${c.credentialsHint}`,
  ExpiredToken: (c) => `the credentials have expired: ${c.credentialsHint}`,
  AccessDenied: (c) =>
    `access denied to bucket "${c.bucket}": grant the credentials s3:ListBucket, s3:GetObject, s3:PutObject, s3:DeleteObject and s3:AbortMultipartUpload`,
  PermanentRedirect: (c) => `bucket "${c.bucket}" is in another region: set ?region=... in --store (or AWS_REGION)`,
  AuthorizationHeaderMalformed: () =>
    'the request was signed for the wrong region: set ?region=... in --store (or AWS_REGION)',
};

/**
 * A message that names the store, the operation and the fix. Configuration mistakes become UsageError when
 * the store is being opened (exit code 2, before any work); later they are OperationErrors like any failure.
 * SDK messages never carry the secret key, and neither do ours.
 */
export function s3Failure(config: S3Config, what: string, err: unknown, opening = false): Error {
  if (err instanceof StewardError) return err;
  const code = err instanceof S3ServiceException ? err.name : (err as { code?: string; name?: string })?.code;
  const where = `${config.location}: ${what}`;
  const fix = code ? CONFIG_FIXES[code] : undefined;
  const status = statusOf(err);
  let message: string | undefined;
  if (fix) message = `${where}: ${fix(config)}`;
  // HEAD answers carry no error code: a 403 is either wrong credentials or missing permissions.
  else if (status === 403)
    message = `${where}: forbidden (403): ${config.credentialsHint}, and that they may use bucket "${config.bucket}"`;
  else if (status === 404 && opening) message = `${where}: ${CONFIG_FIXES.NoSuchBucket(config)}`;
  else if (status === 301) message = `${where}: ${CONFIG_FIXES.PermanentRedirect(config)}`;
  else if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    message = `${where}: cannot reach ${config.endpoint ?? 'the S3 endpoint'} (${code}): check the endpoint option and that the server is up`;
  } else if (/Region is missing/i.test(errorMessage(err))) {
    message = `${where}: no region: add ?region=... to --store, or set AWS_REGION`;
  } else if ((err as Error)?.name === 'CredentialsProviderError') {
    message = `${where}: no AWS credentials found: set ${AWS_CREDENTIAL_ENV.directory} (a directory with accessKeyID and secretAccessKey), ${AWS_CREDENTIAL_ENV.json}, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`;
  }
  if (message) return opening ? new UsageError(message, { cause: err }) : new OperationError(message, { cause: err });
  const detail = [code, status && `HTTP ${status}`].filter(Boolean).join(', ');
  return new OperationError(`${where} failed: ${errorMessage(err)}${detail ? ` (${detail})` : ''}`, { cause: err });
}
