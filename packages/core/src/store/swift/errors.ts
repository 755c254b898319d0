import { errorMessage, OperationError, StewardError, UsageError } from '../../common/errors.js';
import { statusOf } from '../retry.js';
import { OPENSTACK_CREDENTIAL_ENV, type SwiftConfig } from './config.js';

/** An answer of Swift or Keystone that is not a success; `status` lets the retry wrapper judge it. */
export class SwiftHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'SwiftHttpError';
  }
}

const credentialsHint = `check ${OPENSTACK_CREDENTIAL_ENV.directory} / ${OPENSTACK_CREDENTIAL_ENV.json} (or the OS_* variables)`;

/**
 * A message that names the store, the operation and the fix. Configuration mistakes become UsageError when the
 * store is being opened (exit code 2, before any work); later they are OperationErrors like any failure.
 * Neither Swift's nor Keystone's answers carry the password or the token, and neither do ours.
 */
export function swiftFailure(config: SwiftConfig, what: string, err: unknown, opening = false): Error {
  if (err instanceof StewardError) return err;
  const where = `${config.location}: ${what}`;
  const status = statusOf(err);
  const code = (err as { cause?: { code?: string } })?.cause?.code ?? (err as { code?: unknown })?.code;
  let message: string | undefined;
  if (status === 401) message = `${where}: the credentials were refused (401): ${credentialsHint}`;
  else if (status === 403)
    message = `${where}: forbidden (403): the credentials' project may not use container "${config.container}"; ${credentialsHint}`;
  else if (status === 404 && opening)
    message = `${where}: container "${config.container}" does not exist: create it (swift post ${config.container}), or fix --store`;
  else if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    message = `${where}: cannot reach ${config.identity.authUrl} or the Swift endpoint (${code}): check authURL and that the servers are up`;
  }
  if (message) return opening ? new UsageError(message, { cause: err }) : new OperationError(message, { cause: err });
  return new OperationError(`${where} failed: ${errorMessage(err)}${status ? ` (HTTP ${status})` : ''}`, {
    cause: err,
  });
}
