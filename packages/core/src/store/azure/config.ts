import { UsageError } from '../../common/errors.js';
import { type CredentialSource, readCredentials } from '../credential-files.js';
import { parseBoolean, QueryOptions } from '../query-options.js';
import type { StoreLocation } from '../store-url.js';
import { TRANSFER_OPTIONS, type TransferOptions, transferOptions } from '../transfer-options.js';

/**
 * Everything an Azure Blob store needs, from (highest first) the URL's query, ebr's credential files and the
 * environment Azure's own tools use (AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_ACCOUNT/KEY).
 */
export interface AzureConfig {
  container: string;
  prefix: string;
  location: string;
  /** e.g. https://account.blob.core.windows.net, or http://127.0.0.1:10000/devstoreaccount1 for azurite. */
  accountUrl: string;
  account: string;
  credentials: AzureCredentials;
  transfer: TransferOptions;
}

export type AzureCredentials =
  | { kind: 'files'; source: CredentialSource }
  | { kind: 'key'; account: string; key: string }
  | { kind: 'connection-string'; value: string };

export const AZURE_CREDENTIAL_ENV = {
  directory: 'AZURE_APPLICATION_CREDENTIALS',
  json: 'AZURE_APPLICATION_CREDENTIALS_JSON',
};
export const AZURE_CREDENTIAL_FIELDS = ['storageAccount', 'storageKey', 'domain', 'emulatorEnabled'] as const;

const QUERY_OPTIONS = ['endpoint', 'domain', ...TRANSFER_OPTIONS];
const DEFAULT_DOMAIN = 'blob.core.windows.net';
const EMULATOR_HOST = '127.0.0.1:10000';

export async function azureConfig(location: StoreLocation, env: NodeJS.ProcessEnv = process.env): Promise<AzureConfig> {
  const where = `azblob://${location.container}/${location.prefix}`.replace(/\/$/, '');
  const query = new QueryOptions(location).allowOnly(QUERY_OPTIONS);
  const source = await readCredentials(AZURE_CREDENTIAL_ENV, AZURE_CREDENTIAL_FIELDS, env);
  const transfer = transferOptions(query, { min: 1 }, where);
  const base = { container: location.container, prefix: location.prefix, location: where, transfer };

  const connectionString = env.AZURE_STORAGE_CONNECTION_STRING;
  if (!source && connectionString) {
    const account = /AccountName=([^;]+)/i.exec(connectionString)?.[1] ?? '';
    const blobEndpoint = /BlobEndpoint=([^;]+)/i.exec(connectionString)?.[1];
    const accountUrl =
      query.string('endpoint') ?? blobEndpoint ?? `https://${account}.${query.string('domain') ?? DEFAULT_DOMAIN}`;
    return {
      ...base,
      accountUrl: trimSlash(accountUrl),
      account,
      credentials: { kind: 'connection-string', value: connectionString },
    };
  }

  const values = source?.values ?? {};
  const account = values.storageAccount ?? env.AZURE_STORAGE_ACCOUNT;
  const key = values.storageKey ?? env.AZURE_STORAGE_KEY;
  if (!account || !key) {
    const from = source ? `${source.origin} lacks storageAccount or storageKey` : 'no Azure credentials found';
    throw new UsageError(
      `${where}: ${from}: set ${AZURE_CREDENTIAL_ENV.directory} (a directory with storageAccount and storageKey), ` +
        `${AZURE_CREDENTIAL_ENV.json}, AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY`,
    );
  }
  const emulator = values.emulatorEnabled
    ? parseBoolean(values.emulatorEnabled, `${source!.origin} emulatorEnabled`)
    : false;
  const domain = query.string('domain') ?? values.domain;
  const accountUrl =
    query.string('endpoint') ??
    (emulator ? `http://${domain ?? EMULATOR_HOST}/${account}` : `https://${account}.${domain ?? DEFAULT_DOMAIN}`);
  if (!/^https?:\/\/[^/]+/.test(accountUrl)) {
    throw new UsageError(`${where}: endpoint "${accountUrl}" is not an http(s) URL of a storage account`);
  }
  return {
    ...base,
    accountUrl: trimSlash(accountUrl),
    account,
    credentials: source ? { kind: 'files', source } : { kind: 'key', account, key },
  };
}

function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
