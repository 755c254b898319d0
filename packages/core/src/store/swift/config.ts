import { UsageError } from '../../common/errors.js';
import { type CredentialEnv, type CredentialSource, readCredentials } from '../credential-files.js';
import { QueryOptions } from '../query-options.js';
import type { StoreLocation } from '../store-url.js';
import { TRANSFER_OPTIONS, type TransferOptions, transferOptions } from '../transfer-options.js';

/**
 * Everything a Swift store needs, from (highest first) the URL's query, ebr's credential files
 * (OPENSTACK_APPLICATION_CREDENTIALS: a directory of one-value files or a JSON file) and the OS_* variables of
 * OpenStack's own tools, which ebr reads when there are no files. docs/stores.md lists every name.
 */
export interface SwiftConfig {
  container: string;
  prefix: string;
  /** `swift://container/prefix`, for messages. */
  location: string;
  /** Which endpoint of the catalog: the region (any, when the catalog offers one) and the interface. */
  region?: string;
  interface: 'public' | 'internal' | 'admin';
  transfer: TransferOptions;
  /** Where the credentials came from, for messages; and the files, re-read when they change. */
  origin: string;
  credentials?: CredentialSource;
  identity: SwiftIdentity;
}

/** How to log in: Keystone v3 (password or application credential), or auth v1 (tempauth, Swift's test rigs). */
export type SwiftIdentity =
  | {
      kind: 'password';
      authUrl: string;
      username: string;
      password: string;
      userDomain?: string;
      project?: { name: string; domain?: string } | { id: string };
    }
  | {
      kind: 'application-credential';
      authUrl: string;
      secret: string;
      id?: string;
      name?: string;
      /** With a name rather than an id, Keystone needs the owner. */
      username?: string;
      userDomain?: string;
    }
  | { kind: 'v1'; authUrl: string; user: string; key: string };

export const OPENSTACK_CREDENTIAL_ENV: CredentialEnv = {
  directory: 'OPENSTACK_APPLICATION_CREDENTIALS',
  json: 'OPENSTACK_APPLICATION_CREDENTIALS_JSON',
};

/** The names ebr reads, as files in the directory and as JSON fields. */
export const OPENSTACK_CREDENTIAL_FIELDS = [
  'authURL',
  'domainName',
  'tenantName',
  'username',
  'password',
  'region',
  'applicationCredentialID',
  'applicationCredentialName',
  'applicationCredentialSecret',
] as const;

const QUERY_OPTIONS = ['region', 'interface', ...TRANSFER_OPTIONS];

/** SLO's smallest segment but the last (Swift's min_segment_size default). */
const MIN_SEGMENT_SIZE = 1024 * 1024;
/**
 * A segment a part: 16 MiB segments reach 16 GB within the 1,000 segments a manifest may name (Swift's
 * max_manifest_segments default), above etcd's 8 GiB database limit.
 */
const DEFAULT_SEGMENT_SIZE = 16 * 1024 * 1024;

export async function swiftConfig(location: StoreLocation, env: NodeJS.ProcessEnv = process.env): Promise<SwiftConfig> {
  const where = `swift://${location.container}/${location.prefix}`.replace(/\/$/, '');
  const query = new QueryOptions(location).allowOnly(QUERY_OPTIONS);
  const transfer = transferOptions(query, { min: MIN_SEGMENT_SIZE, defaultSize: DEFAULT_SEGMENT_SIZE }, where);
  const credentials = await readCredentials(OPENSTACK_CREDENTIAL_ENV, OPENSTACK_CREDENTIAL_FIELDS, env);
  const origin = credentials?.origin ?? 'the OS_* environment variables';
  const values = credentials ? credentials.values : fromEnvironment(env);
  return {
    container: location.container,
    prefix: location.prefix,
    location: where,
    region: query.string('region') ?? (values.region || undefined) ?? (env.OS_REGION_NAME || undefined),
    interface: query.oneOf('interface', ['public', 'internal', 'admin'] as const) ?? interfaceOf(env.OS_INTERFACE),
    transfer,
    origin,
    credentials,
    identity: swiftIdentity(values, env, `${where}: ${origin}`),
  };
}

/** The identity the values describe, or a UsageError saying what is missing. `where` names the source. */
export function swiftIdentity(values: Record<string, string>, env: NodeJS.ProcessEnv, where: string): SwiftIdentity {
  const authUrl = values.authURL;
  if (!authUrl) {
    throw new UsageError(
      `${where}: no authURL: set ${OPENSTACK_CREDENTIAL_ENV.directory} (a directory with authURL, tenantName, domainName, username and password, or an application credential), ${OPENSTACK_CREDENTIAL_ENV.json}, or OS_AUTH_URL and the other OS_* variables`,
    );
  }
  if (!/^https?:\/\/[^/]+/.test(authUrl)) {
    throw new UsageError(`${where}: authURL "${authUrl}" is not an http(s) URL, e.g. https://keystone.example:5000/v3`);
  }
  const version = authVersion(authUrl);
  const hasSecret = Boolean(values.applicationCredentialSecret || values.applicationCredentialID);
  if (hasSecret && values.password) {
    throw new UsageError(
      `${where}: gives both a password and an application credential: keep one (ebr refuses this too)`,
    );
  }
  if (version === 'v1') {
    if (!values.username || !values.password) {
      throw new UsageError(`${where}: auth v1 (${authUrl}) needs username and password (tempauth's user and key)`);
    }
    const user =
      values.username.includes(':') || !values.tenantName ? values.username : `${values.tenantName}:${values.username}`;
    return { kind: 'v1', authUrl, user, key: values.password };
  }
  if (version === 'v2') {
    throw new UsageError(`${where}: authURL ${authUrl} is Keystone v2, which OpenStack removed: use its /v3 URL`);
  }
  const userDomain = env.OS_USER_DOMAIN_NAME || values.domainName || undefined;
  if (hasSecret) {
    if (!values.applicationCredentialSecret) {
      throw new UsageError(`${where}: an application credential needs applicationCredentialSecret`);
    }
    if (!values.applicationCredentialID && !(values.applicationCredentialName && values.username)) {
      throw new UsageError(
        `${where}: an application credential needs applicationCredentialID, or applicationCredentialName with its owner's username`,
      );
    }
    return {
      kind: 'application-credential',
      authUrl,
      secret: values.applicationCredentialSecret,
      id: values.applicationCredentialID || undefined,
      name: values.applicationCredentialName || undefined,
      username: values.username || undefined,
      userDomain,
    };
  }
  if (!values.username || !values.password) {
    throw new UsageError(`${where}: needs username and password, or an application credential`);
  }
  const projectDomain = env.OS_PROJECT_DOMAIN_NAME || values.domainName || undefined;
  const project = values.projectID
    ? { id: values.projectID }
    : values.tenantName
      ? { name: values.tenantName, domain: projectDomain }
      : undefined;
  if (project && 'name' in project && !project.domain) {
    throw new UsageError(`${where}: project "${project.name}" needs domainName (the domain of the user and project)`);
  }
  if (!userDomain) throw new UsageError(`${where}: user "${values.username}" needs domainName`);
  return { kind: 'password', authUrl, username: values.username, password: values.password, userDomain, project };
}

/**
 * OpenStack's own variables, as ebr falls back on them (through gophercloud) when no credential files are given.
 * OS_TENANT_* are the older names of OS_PROJECT_*.
 */
function fromEnvironment(env: NodeJS.ProcessEnv): Record<string, string> {
  const pick = (...names: string[]) => names.map((n) => env[n]).find((v) => v) ?? '';
  const values: Record<string, string> = {
    authURL: pick('OS_AUTH_URL'),
    username: pick('OS_USERNAME'),
    password: pick('OS_PASSWORD'),
    domainName: pick('OS_DOMAIN_NAME', 'OS_USER_DOMAIN_NAME'),
    tenantName: pick('OS_PROJECT_NAME', 'OS_TENANT_NAME'),
    projectID: pick('OS_PROJECT_ID', 'OS_TENANT_ID'),
    region: pick('OS_REGION_NAME'),
    applicationCredentialID: pick('OS_APPLICATION_CREDENTIAL_ID'),
    applicationCredentialName: pick('OS_APPLICATION_CREDENTIAL_NAME'),
    applicationCredentialSecret: pick('OS_APPLICATION_CREDENTIAL_SECRET'),
  };
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v));
}

function authVersion(authUrl: string): 'v1' | 'v2' | 'v3' {
  const path = new URL(authUrl).pathname.replace(/\/+$/, '');
  if (/\/(auth\/)?v1(\.0)?$/.test(path)) return 'v1';
  if (/\/v2(\.0)?$/.test(path)) return 'v2';
  return 'v3';
}

function interfaceOf(value: string | undefined): SwiftConfig['interface'] {
  const v = (value ?? '').replace(/URL$/, '').toLowerCase();
  return v === 'internal' || v === 'admin' ? v : 'public';
}
