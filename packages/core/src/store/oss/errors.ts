import { errorMessage, OperationError, StewardError, UsageError } from '../../common/errors.js';
import { statusOf, TransientError } from '../retry.js';
import { ALICLOUD_CREDENTIAL_ENV, type OssConfig } from './config.js';

const credentialsHint = `check ${ALICLOUD_CREDENTIAL_ENV.directory} / ${ALICLOUD_CREDENTIAL_ENV.json}`;

/** OSS error codes that mean the configuration is wrong, with what to do about each. */
const CONFIG_FIXES: Record<string, (c: OssConfig) => string> = {
  NoSuchBucket: (c) => `bucket "${c.bucket}" does not exist: create it, or fix the bucket in --store`,
  InvalidAccessKeyId: () => `the access key was refused: ${credentialsHint}`,
  SignatureDoesNotMatch: () => `the secret does not match the access key: ${credentialsHint}`,
  AccessDenied: (c) => `access denied to bucket "${c.bucket}": grant the key read, write, list and delete on it`,
};

/**
 * ali-oss reports a network failure or its own timeout with status -1 or -2 and a name of its own: such an error
 * becomes a TransientError for the retry wrapper, unless the host refused or does not exist (configuration).
 */
export function normalizeOssError(err: unknown): unknown {
  const e = err as { status?: unknown; name?: unknown; code?: unknown };
  const netError = e?.status === -1 || e?.status === -2 || /Timeout|RequestError|ResponseError/.test(String(e?.name));
  if (netError && !/ECONNREFUSED|ENOTFOUND/.test(`${e?.code} ${errorMessage(err)}`)) {
    return new TransientError(errorMessage(err), { cause: err });
  }
  return err;
}

/** A message naming the store, the operation and the fix; UsageError for configuration mistakes at open. */
export function ossFailure(config: OssConfig, what: string, err: unknown, opening = false): Error {
  if (err instanceof StewardError) return err;
  const code = String((err as { code?: unknown })?.code ?? '');
  const where = `${config.location}: ${what}`;
  const status = statusOf(err);
  let message: string | undefined;
  if (CONFIG_FIXES[code]) message = `${where}: ${CONFIG_FIXES[code](config)}`;
  else if (status === 403) message = `${where}: forbidden (403): ${credentialsHint}`;
  else if (/ECONNREFUSED|ENOTFOUND|EAI_AGAIN/.test(`${code} ${errorMessage(err)}`)) {
    message = `${where}: cannot reach ${config.endpoint}: check storageEndpoint (or ?endpoint=) and that the server is up`;
  }
  if (message) return opening ? new UsageError(message, { cause: err }) : new OperationError(message, { cause: err });
  return new OperationError(`${where} failed: ${errorMessage(err)}${status ? ` (HTTP ${status})` : ''}`, {
    cause: err,
  });
}
