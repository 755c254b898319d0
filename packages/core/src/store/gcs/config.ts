import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { UsageError } from '../../common/errors.js';
import { QueryOptions } from '../query-options.js';
import type { StoreLocation } from '../store-url.js';
import { TRANSFER_OPTIONS, type TransferOptions, transferOptions } from '../transfer-options.js';

/**
 * Everything a GCS store needs, from (highest first) the URL's query, ebr's files and the environment the
 * Google libraries read (GOOGLE_APPLICATION_CREDENTIALS, STORAGE_EMULATOR_HOST).
 */
export interface GcsConfig {
  bucket: string;
  prefix: string;
  location: string;
  /** e.g. http://127.0.0.1:4443 for an emulator; undefined for Google's own endpoint. */
  endpoint?: string;
  /**
   * Whether requests are authenticated. Not for plain-http endpoints: only emulators speak http, and they
   * want no credentials (ebr decides the same way).
   */
  authenticate: boolean;
  /** The service account (or external account) JSON file; re-read when it changes. */
  keyFile?: string;
  transfer: TransferOptions;
}

export const GOOGLE_CREDENTIALS_ENV = 'GOOGLE_APPLICATION_CREDENTIALS';
/** ebr's (deprecated) way to set the endpoint: a file beside the credentials. */
const ENDPOINT_FILE = 'storageAPIEndpoint';
const QUERY_OPTIONS = ['endpoint', ...TRANSFER_OPTIONS];
/** Resumable upload chunks are multiples of 256 KiB. */
const CHUNK_MULTIPLE = 256 * 1024;

export async function gcsConfig(location: StoreLocation, env: NodeJS.ProcessEnv = process.env): Promise<GcsConfig> {
  const where = `gs://${location.container}/${location.prefix}`.replace(/\/$/, '');
  const query = new QueryOptions(location).allowOnly(QUERY_OPTIONS);
  const keyFile = env[GOOGLE_CREDENTIALS_ENV] || undefined;
  if (keyFile) await checkKeyFile(keyFile, where);
  const emulatorHost = env.STORAGE_EMULATOR_HOST;
  const endpoint =
    query.string('endpoint') ??
    (keyFile ? await readEndpointFile(join(dirname(keyFile), ENDPOINT_FILE)) : undefined) ??
    (emulatorHost ? (/^https?:\/\//.test(emulatorHost) ? emulatorHost : `http://${emulatorHost}`) : undefined);
  if (endpoint !== undefined && !/^https?:\/\/[^/]+/.test(endpoint)) {
    throw new UsageError(`${where}: endpoint "${endpoint}" is not an http(s) URL`);
  }
  return {
    bucket: location.container,
    prefix: location.prefix,
    location: where,
    endpoint: endpoint?.replace(/\/+$/, ''),
    authenticate: !endpoint?.startsWith('http://'),
    keyFile,
    transfer: transferOptions(query, { min: CHUNK_MULTIPLE, multipleOf: CHUNK_MULTIPLE }, where),
  };
}

/** Checked here so that a broken file is reported by name, without the parser quoting its (secret) text. */
async function checkKeyFile(file: string, where: string): Promise<void> {
  let parsed: { type?: unknown };
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    const reason = err instanceof SyntaxError ? 'not valid JSON' : (err as Error).message;
    throw new UsageError(`${where}: ${GOOGLE_CREDENTIALS_ENV}=${file} cannot be used (${reason})`);
  }
  const types = ['service_account', 'external_account', 'authorized_user', 'impersonated_service_account'];
  if (!types.includes(String(parsed?.type))) {
    throw new UsageError(
      `${where}: ${GOOGLE_CREDENTIALS_ENV}=${file} is not a Google credentials file (type is not one of ${types.join(', ')})`,
    );
  }
}

async function readEndpointFile(file: string): Promise<string | undefined> {
  try {
    return (await readFile(file, 'utf8')).trim() || undefined;
  } catch {
    return undefined;
  }
}
