import { OperationError, UsageError } from '../../common/errors.js';
import { RotatingCredentials, readCredentials } from '../credential-files.js';
import { withTimeout } from '../request-timeout.js';
import {
  OPENSTACK_CREDENTIAL_ENV,
  OPENSTACK_CREDENTIAL_FIELDS,
  type SwiftConfig,
  type SwiftIdentity,
  swiftIdentity,
} from './config.js';
import { SwiftHttpError } from './errors.js';

/** A token and the account URL it is good for. */
export interface SwiftSession {
  storageUrl: string;
  token: string;
  /** Milliseconds since the epoch; a session is renewed a minute before. */
  expiresAt: number;
}

const RENEW_BEFORE_MS = 60_000;
/** tempauth's default token life, when it does not say. */
const V1_TOKEN_LIFE_MS = 86_400_000;

/**
 * Logs in to Keystone v3 (password or application credential, as ebr does through gophercloud) or to auth v1
 * (tempauth), and keeps the session: renewed before it expires, dropped when a request is refused (401) or when
 * the credential files change, so that a rotated Secret is used with no restart.
 */
export class SwiftAuth {
  private session?: Promise<SwiftSession>;
  private readonly rotating?: RotatingCredentials;
  private identity: SwiftIdentity;
  private source?: unknown;

  constructor(
    private readonly config: SwiftConfig,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {
    this.identity = config.identity;
    if (config.credentials) {
      this.rotating = new RotatingCredentials(() =>
        readCredentials(OPENSTACK_CREDENTIAL_ENV, OPENSTACK_CREDENTIAL_FIELDS, env),
      );
    }
  }

  async current(): Promise<SwiftSession> {
    if (this.rotating) {
      const source = await this.rotating.current();
      if (source && source !== this.source) {
        this.source = source;
        this.identity = swiftIdentity(source.values, this.env, `${this.config.location}: ${source.origin}`);
        this.session = undefined;
      }
    }
    const pending = this.session;
    if (pending) {
      const session = await pending.catch(() => undefined);
      if (session && session.expiresAt - RENEW_BEFORE_MS > Date.now()) return session;
      if (this.session !== pending) return this.current();
    }
    const next = this.login();
    this.session = next;
    next.catch(() => {
      if (this.session === next) this.session = undefined;
    });
    return next;
  }

  /** The server refused this session's token: the next request logs in again. */
  refused(session: SwiftSession): void {
    void this.session?.then((s) => {
      if (s === session) this.session = undefined;
    });
  }

  private login(): Promise<SwiftSession> {
    const identity = this.identity;
    const timeoutMs = this.config.transfer.timeoutMs;
    return withTimeout(timeoutMs, undefined, (signal) =>
      identity.kind === 'v1' ? loginV1(identity, signal) : loginV3(identity, this.config, signal),
    );
  }
}

async function loginV1(identity: Extract<SwiftIdentity, { kind: 'v1' }>, signal: AbortSignal): Promise<SwiftSession> {
  const res = await fetch(identity.authUrl, {
    headers: { 'x-auth-user': identity.user, 'x-auth-key': identity.key },
    signal,
  });
  await res.arrayBuffer();
  if (!res.ok) throw new SwiftHttpError(res.status, `auth v1 at ${identity.authUrl} answered ${res.status}`);
  const storageUrl = res.headers.get('x-storage-url');
  const token = res.headers.get('x-auth-token');
  if (!storageUrl || !token) {
    throw new OperationError(`auth v1 at ${identity.authUrl} gave no X-Storage-Url or X-Auth-Token: is it Swift's?`);
  }
  const life = Number(res.headers.get('x-auth-token-expires'));
  return { storageUrl, token, expiresAt: Date.now() + (life > 0 ? life * 1000 : V1_TOKEN_LIFE_MS) };
}

interface CatalogEntry {
  type?: string;
  endpoints?: { interface?: string; region?: string; region_id?: string; url?: string }[];
}

async function loginV3(
  identity: Exclude<SwiftIdentity, { kind: 'v1' }>,
  config: SwiftConfig,
  signal: AbortSignal,
): Promise<SwiftSession> {
  const url = `${identity.authUrl.replace(/\/+$/, '').replace(/(\/v3)?$/, '/v3')}/auth/tokens`;
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ auth: authBody(identity) }),
    signal,
  });
  const text = await res.text();
  if (!res.ok) {
    // Keystone's error bodies say what was wrong without echoing secrets: keep the message, a short one.
    const reason = (() => {
      try {
        return String((JSON.parse(text) as { error?: { message?: unknown } }).error?.message ?? '');
      } catch {
        return '';
      }
    })();
    throw new SwiftHttpError(
      res.status,
      `Keystone at ${url} answered ${res.status}${reason ? `: ${reason.slice(0, 200)}` : ''}`,
    );
  }
  const token = res.headers.get('x-subject-token');
  let body: { token?: { expires_at?: string; catalog?: CatalogEntry[] } };
  try {
    body = JSON.parse(text);
  } catch {
    throw new OperationError(`Keystone at ${url} answered with something that is not JSON: is authURL Keystone's?`);
  }
  if (!token) throw new OperationError(`Keystone at ${url} gave no X-Subject-Token`);
  const storageUrl = objectStoreUrl(body.token?.catalog ?? [], config);
  const expiresAt = Date.parse(body.token?.expires_at ?? '') || Date.now() + 3_600_000;
  return { storageUrl, token, expiresAt };
}

function authBody(identity: Exclude<SwiftIdentity, { kind: 'v1' }>): object {
  const domain = (name?: string) => (name ? { domain: { name } } : {});
  if (identity.kind === 'application-credential') {
    const credential = identity.id
      ? { id: identity.id, secret: identity.secret }
      : {
          name: identity.name,
          secret: identity.secret,
          user: { name: identity.username, ...domain(identity.userDomain) },
        };
    // An application credential carries its own project: Keystone refuses a scope beside it.
    return { identity: { methods: ['application_credential'], application_credential: credential } };
  }
  const { project } = identity;
  return {
    identity: {
      methods: ['password'],
      password: { user: { name: identity.username, password: identity.password, ...domain(identity.userDomain) } },
    },
    ...(project && {
      scope: { project: 'id' in project ? { id: project.id } : { name: project.name, ...domain(project.domain) } },
    }),
  };
}

/** The object-store endpoint of the catalog for the configured region and interface. */
function objectStoreUrl(catalog: CatalogEntry[], config: SwiftConfig): string {
  const endpoints = catalog
    .filter((entry) => entry.type === 'object-store')
    .flatMap((entry) => entry.endpoints ?? [])
    .filter((e) => (e.interface ?? 'public') === config.interface && e.url);
  if (endpoints.length === 0) {
    throw new UsageError(
      `${config.location}: the Keystone catalog has no ${config.interface} object-store endpoint: is Swift registered in this cloud, and may the project use it?`,
    );
  }
  const regions = [...new Set(endpoints.map((e) => e.region ?? e.region_id ?? ''))];
  const chosen = config.region
    ? endpoints.filter((e) => e.region === config.region || e.region_id === config.region)
    : regions.length === 1
      ? endpoints
      : [];
  if (chosen.length === 0) {
    throw new UsageError(
      config.region
        ? `${config.location}: the catalog has no object-store endpoint in region "${config.region}"; it has: ${regions.join(', ')}`
        : `${config.location}: the catalog has object-store endpoints in several regions (${regions.join(', ')}): set region in the credentials, OS_REGION_NAME, or ?region= in --store`,
    );
  }
  return chosen[0].url!.replace(/\/+$/, '');
}
