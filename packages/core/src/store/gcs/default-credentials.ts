import type { Storage } from '@google-cloud/storage';
import { errorMessage, UsageError } from '../../common/errors.js';
import { GOOGLE_CREDENTIALS_ENV } from './config.js';

/**
 * Without a credentials file the Google libraries look for credentials themselves: gcloud's application-default
 * login, then the metadata server of GKE and GCE. When they find none, they print a Node warning about the
 * metadata server and the first request fails for a reason that hides the cause (a DNS error, say). So this
 * asks for the credentials first, keeps the library's warning to itself and says what is missing.
 */
export async function checkDefaultCredentials(storage: Storage, where: string): Promise<void> {
  const emitWarning = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    if (type !== 'MetadataLookupWarning') Reflect.apply(emitWarning, process, [warning, ...rest]);
  }) as typeof process.emitWarning;
  try {
    await storage.authClient.getClient();
  } catch (err) {
    if (!/Could not load the default credentials/i.test(errorMessage(err))) throw err;
    throw new UsageError(
      `${where}: no Google credentials found: ${GOOGLE_CREDENTIALS_ENV} is not set, there are no gcloud application-default credentials (gcloud auth application-default login), and no GKE/GCE metadata server answered. Set ${GOOGLE_CREDENTIALS_ENV} to a service account JSON file`,
    );
  } finally {
    process.emitWarning = emitWarning;
  }
}
