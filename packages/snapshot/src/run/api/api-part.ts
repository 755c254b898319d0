import { readFile } from 'node:fs/promises';
import { flagGiven } from '@etcd-steward/core/cli';
import { UsageError } from '@etcd-steward/core/common';
import type { SidecarPart } from '../sidecar-part.js';
import type { HttpServerOptions } from './http-server.js';

export interface ApiArgs {
  server: boolean;
  'server-host': string;
  'server-port': number;
  'server-tls-cert'?: string;
  'server-tls-key'?: string;
  'server-tls-client-ca'?: string;
  'server-token-file'?: string;
  'server-max-connections': number;
  'server-max-forwarded': number;
}

/** The HTTP API: /healthz, /metrics and every other part's routes, ebr's shapes (docs/sidecar.md). */
export const apiPart: SidecarPart<ApiArgs> = {
  name: 'api',
  heading: 'HTTP API',
  options: (y) =>
    y
      .option('server', { type: 'boolean', default: true, describe: 'Serve the HTTP API (--no-server: none)' })
      .option('server-host', { type: 'string', default: '0.0.0.0', describe: 'Address the HTTP server binds' })
      .option('server-port', { type: 'number', default: 8080, describe: 'Port of the HTTP server' })
      .option('server-tls-cert', { type: 'string', describe: 'PEM certificate: serve HTTPS (with --server-tls-key)' })
      .option('server-tls-key', { type: 'string', describe: 'PEM private key of --server-tls-cert' })
      .option('server-tls-client-ca', {
        type: 'string',
        describe:
          'PEM CA: every endpoint but /healthz, /metrics and /snapshot/latest needs a client certificate it signed (with HTTPS)',
      })
      .option('server-token-file', {
        type: 'string',
        describe:
          'File holding a token: every endpoint but /healthz, /metrics and /snapshot/latest needs "Authorization: Bearer <token>"',
      })
      .option('server-max-connections', {
        type: 'number',
        default: 100,
        describe:
          'Connections served at once: past it a request gets 503 with Retry-After (/healthz excepted); past twice as many, connections are closed',
      })
      .option('server-max-forwarded', {
        type: 'number',
        default: 8,
        describe:
          "Snapshot requests a follower passes on to the leader's sidecar at once (each may wait for a full snapshot): past it, 503 with Retry-After",
      }),

  async configure(args, base) {
    if (!args.server) return undefined;
    const options = await serverOptions(args);
    const { tls } = options;
    const ca = base.connection.cacert ? await readPem(base.connection.cacert, '--cacert') : undefined;
    // Built last (parts.ts): every other component's routes are known by then.
    return async (assembly, context) => {
      const [{ HttpServer }, { LeaderForward }] = await Promise.all([
        import('./http-server.js'),
        import('./leader-forward.js'),
      ]);
      const forward = new LeaderForward(assembly.leadership, {
        serverPort: options.port,
        tls: tls !== undefined,
        ca,
        clientCertificate: tls?.clientCa && { cert: tls.cert, key: tls.key },
        maxInFlight: args['server-max-forwarded'],
      });
      return [
        new HttpServer({ ...options, forward }, assembly.routes(), () => assembly.healthy(), {
          ...context,
          registry: assembly.metrics(),
        }),
      ];
    };
  },
};

async function serverOptions(args: ApiArgs): Promise<HttpServerOptions> {
  const port = args['server-port'];
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(`${flagGiven(args, 'server-port', port)} is not a port number (0-65535)`);
  }
  const cert = args['server-tls-cert'];
  const key = args['server-tls-key'];
  if ((cert === undefined) !== (key === undefined)) {
    throw new UsageError('--server-tls-cert and --server-tls-key go together: give both for HTTPS, or neither');
  }
  const clientCa = args['server-tls-client-ca'];
  if (clientCa !== undefined && !cert) {
    throw new UsageError('--server-tls-client-ca needs HTTPS: give --server-tls-cert and --server-tls-key too');
  }
  const tls =
    cert && key
      ? {
          cert: await readPem(cert, '--server-tls-cert'),
          key: await readPem(key, '--server-tls-key'),
          clientCa: clientCa === undefined ? undefined : await readPem(clientCa, '--server-tls-client-ca'),
        }
      : undefined;
  const tokenFile = args['server-token-file'];
  for (const flag of ['server-max-connections', 'server-max-forwarded'] as const) {
    if (!Number.isInteger(args[flag]) || args[flag] < 1) {
      throw new UsageError(`${flagGiven(args, flag, args[flag])} must be a whole number of 1 or more`);
    }
  }
  return {
    host: args['server-host'],
    port,
    tls,
    token: tokenFile === undefined ? undefined : await readToken(tokenFile),
    maxConnections: args['server-max-connections'],
  };
}

/** The token without the line end an editor or `echo` adds; an empty one would protect nothing. */
async function readToken(path: string): Promise<Buffer> {
  const token = (await readPem(path, '--server-token-file')).toString('utf8').trim();
  if (!token) throw new UsageError(`--server-token-file ${path} is empty: put the token in it`);
  if (/\s/.test(token)) {
    throw new UsageError(`--server-token-file ${path}: the token must be one word (no spaces or line breaks)`);
  }
  return Buffer.from(token);
}

async function readPem(path: string, flag: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new UsageError(`${flag} ${path}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? err})`);
  }
}
