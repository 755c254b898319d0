import { errorMessage, OperationError, StewardError, UsageError } from '../../common/errors.js';
import { statusOf } from '../retry.js';
import { AZURE_CREDENTIAL_ENV, type AzureConfig } from './config.js';

const credentialsHint = `check storageAccount and storageKey in ${AZURE_CREDENTIAL_ENV.directory} / ${AZURE_CREDENTIAL_ENV.json}`;

const CONFIG_FIXES: Record<string, (c: AzureConfig) => string> = {
  ContainerNotFound: (c) => `container "${c.container}" does not exist: create it, or fix the container in --store`,
  AuthenticationFailed: () => `the storage key was refused: ${credentialsHint}`,
  AuthorizationFailure: (c) => `access denied to container "${c.container}": ${credentialsHint}`,
  AuthorizationPermissionMismatch: (c) => `the credentials may not use container "${c.container}": ${credentialsHint}`,
  InvalidResourceName: (c) =>
    `"${c.container}" is not a valid container name: use 3-63 lower-case letters, digits and "-"`,
  AccountIsDisabled: (c) => `storage account "${c.account}" is disabled`,
};

/** A message naming the store, the operation and the fix; UsageError for configuration mistakes at open. */
export function azureFailure(config: AzureConfig, what: string, err: unknown, opening = false): Error {
  if (err instanceof StewardError) return err;
  const e = err as { code?: string; details?: { errorCode?: string } };
  const code = e?.details?.errorCode ?? e?.code;
  const status = statusOf(err);
  const where = `${config.location}: ${what}`;
  let message: string | undefined;
  const fix = code ? CONFIG_FIXES[code] : undefined;
  if (fix) message = `${where}: ${fix(config)}`;
  else if (status === 403) message = `${where}: forbidden (403): ${credentialsHint}`;
  else if (/ECONNREFUSED|ENOTFOUND|EAI_AGAIN/.test(`${e?.code} ${errorMessage(err)}`)) {
    message = `${where}: cannot reach ${config.accountUrl}: check the endpoint (or domain) option and that the service is up`;
  }
  if (message) return opening ? new UsageError(message, { cause: err }) : new OperationError(message, { cause: err });
  const detail = [code, status && `HTTP ${status}`].filter(Boolean).join(', ');
  return new OperationError(`${where} failed: ${firstLine(errorMessage(err))}${detail ? ` (${detail})` : ''}`, {
    cause: err,
  });
}

/** Azure's messages append a RequestId and Time on further lines: keep the first. */
function firstLine(text: string): string {
  return text.split('\n')[0];
}
