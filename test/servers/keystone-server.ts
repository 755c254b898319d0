/**
 * A small OpenStack Keystone (identity v3) on 127.0.0.1 in front of the real Swift of swift-server.ts: no Keystone
 * installs here without a database and a web server of its own. It answers `POST /v3/auth/tokens` as Keystone does
 * for the two ways ebr logs in, a password (user and domain, scoped to a project and its domain) and an application
 * credential (by id, or by name with its user; unscoped, as Keystone wants it), and refuses anything else with
 * Keystone's error bodies. The token it hands out is one the real Swift accepts: a tempauth token it asks Swift for,
 * for the account the project maps to; the catalog names that account's storage URL as the project's object-store
 * endpoint (public and internal) in `region`, beside an endpoint in a second region that nothing listens on.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { SwiftServer } from './swift-server.ts';
import { closeServer, listenOnLoopback, type TestServer } from './test-server.ts';

export interface KeystoneUser {
  name: string;
  domain: string;
  password: string;
  /** The project the user may scope to, with its domain. */
  project: { name: string; domain: string };
}

export interface ApplicationCredential {
  id: string;
  name: string;
  secret: string;
  /** Its owner, by name. */
  user: string;
}

export interface KeystoneServer extends TestServer {
  /** The v3 URL, as credentials give authURL: `<endpoint>/v3`. */
  authUrl: string;
  region: string;
  /** Successful logins so far, by method. */
  readonly logins: { password: number; application_credential: number };
  /** The next `count` logins get a token Swift does not know, as a token revoked or expired early would be. */
  staleTokens(count: number): void;
}

const TOKEN_LIFE_MS = 3_600_000;

export async function startKeystone(options: {
  swift: SwiftServer;
  users: KeystoneUser[];
  applicationCredentials?: ApplicationCredential[];
  region?: string;
}): Promise<KeystoneServer> {
  const region = options.region ?? 'RegionOne';
  const logins = { password: 0, application_credential: 0 };
  let stale = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      answer(req, Buffer.concat(chunks).toString()).then(
        ({ status, body, token }) => reply(res, status, body, token),
        (err: unknown) => reply(res, 500, error(500, 'Internal Server Error', String(err))),
      );
    });
  });

  async function answer(req: IncomingMessage, text: string): Promise<{ status: number; body: object; token?: string }> {
    if (
      req.method !== 'POST' ||
      new URL(req.url ?? '/', 'http://x').pathname.replace(/\/+$/, '') !== '/v3/auth/tokens'
    ) {
      return { status: 404, body: error(404, 'Not Found', 'The resource could not be found.') };
    }
    let auth: AuthRequest;
    try {
      auth = (JSON.parse(text) as { auth: AuthRequest }).auth;
    } catch {
      return { status: 400, body: error(400, 'Bad Request', 'Expecting to find auth in request body.') };
    }
    const methods = auth?.identity?.methods ?? [];
    let user: KeystoneUser | undefined;
    let method: keyof typeof logins;
    if (methods.length === 1 && methods[0] === 'password') {
      method = 'password';
      const given = auth.identity.password?.user;
      user = options.users.find(
        (u) => u.name === given?.name && u.domain === given?.domain?.name && u.password === given?.password,
      );
      const scope = auth.scope?.project;
      if (user && (scope?.name !== user.project.name || scope?.domain?.name !== user.project.domain)) {
        return { status: 401, body: unauthorized() };
      }
    } else if (methods.length === 1 && methods[0] === 'application_credential') {
      method = 'application_credential';
      if (auth.scope) {
        return { status: 401, body: error(401, 'Unauthorized', 'Application credentials cannot request a scope.') };
      }
      const given = auth.identity.application_credential;
      const credential = (options.applicationCredentials ?? []).find((c) =>
        given?.id ? c.id === given.id : c.name === given?.name && c.user === given?.user?.name,
      );
      user =
        credential && credential.secret === given?.secret
          ? options.users.find((u) => u.name === credential.user)
          : undefined;
    } else {
      return {
        status: 400,
        body: error(400, 'Bad Request', `Unsupported authentication methods: ${methods.join(', ')}`),
      };
    }
    if (!user) return { status: 401, body: unauthorized() };
    logins[method]++;
    const session = await options.swift.token();
    const { storageUrl } = session;
    const token = stale > 0 ? `AUTH_tk${'0'.repeat(32)}` : session.token;
    if (stale > 0) stale--;
    const unreachable = storageUrl.replace(/^http:\/\/[^/]+/, 'http://127.0.0.1:1');
    const endpoint = (iface: string, url: string, where: string) => ({
      interface: iface,
      region: where,
      region_id: where,
      url,
    });
    return {
      status: 201,
      token,
      body: {
        token: {
          methods: [method],
          expires_at: new Date(Date.now() + TOKEN_LIFE_MS).toISOString(),
          user: { name: user.name, domain: { name: user.domain } },
          project: { name: user.project.name, domain: { name: user.project.domain } },
          catalog: [
            { type: 'identity', name: 'keystone', endpoints: [endpoint('public', `${base}/v3`, region)] },
            {
              type: 'object-store',
              name: 'swift',
              endpoints: [
                endpoint('public', storageUrl, region),
                endpoint('internal', storageUrl, region),
                endpoint('public', unreachable, `${region}-other`),
              ],
            },
          ],
        },
      },
    };
  }

  const base = await listenOnLoopback(server);
  return {
    endpoint: base,
    authUrl: `${base}/v3`,
    region,
    logins,
    staleTokens: (count) => {
      stale = count;
    },
    stop: () => closeServer(server),
  };
}

interface AuthRequest {
  identity: {
    methods: string[];
    password?: { user?: { name?: string; domain?: { name?: string }; password?: string } };
    application_credential?: { id?: string; name?: string; secret?: string; user?: { name?: string } };
  };
  scope?: { project?: { name?: string; domain?: { name?: string } } };
}

function error(code: number, title: string, message: string): object {
  return { error: { code, title, message } };
}

function unauthorized(): object {
  return error(401, 'Unauthorized', 'The request you have made requires authentication.');
}

function reply(res: ServerResponse, status: number, body: object, token?: string): void {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(data.length),
    ...(token && { 'x-subject-token': token }),
  });
  res.end(data);
}
