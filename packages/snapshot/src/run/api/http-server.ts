import { once } from 'node:events';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { errorMessage, http, type Logger, OperationError } from '@etcd-steward/core/common';
import type { Registry } from 'prom-client';
import { type Component, type ComponentContext, RETRY_AFTER, type Route, type RouteResponse } from '../component.js';
import { NotLeaderError } from '../leadership/leadership.js';
import { ApiAccess } from './api-access.js';
import type { LeaderForward } from './leader-forward.js';

export interface HttpServerOptions {
  host: string;
  port: number;
  /** PEM certificate and key: HTTPS when given; with `clientCa`, the CA whose client certificates may act. */
  tls?: { cert: Buffer; key: Buffer; clientCa?: Buffer };
  /** The bearer token every route but the open ones asks for. */
  token?: Buffer;
  /**
   * Connections served at once (--server-max-connections): a request on one past it is answered 503 with
   * Retry-After, /healthz excepted; past twice as many, connections are closed unanswered.
   */
  maxConnections: number;
  /** How long a connection may take to send a request's headers: 10 s unless a test asks for less. */
  headersTimeoutMs?: number;
  /** Where a follower passes forwardable requests on to (the leader's sidecar); without it they get 503. */
  forward?: LeaderForward;
}

/** Requests never carry anything we read; a large body is refused rather than drained. */
const MAX_BODY_BYTES = 64 * 1024;

/**
 * The sidecar's HTTP API: /healthz, /metrics and the routes of the other components. Untrusted input is
 * checked before anything runs: the path must name a route exactly, the method must be one it allows, and
 * only its query parameters may appear.
 */
export class HttpServer implements Component {
  readonly name = 'http-server';
  private server?: Server;
  private readonly table = new Map<string, Route>();
  private readonly registry: Registry;
  private readonly logger: Logger;
  private readonly access: ApiAccess;
  private connections = 0;
  /** Connections that came while --server-max-connections were open. */
  private readonly pastCap = new WeakSet<Socket>();

  constructor(
    private readonly options: HttpServerOptions,
    routes: readonly Route[],
    private readonly allHealthy: () => boolean,
    context: ComponentContext,
  ) {
    this.registry = context.registry;
    this.logger = context.logger;
    this.access = new ApiAccess({ token: options.token, clientCertificate: options.tls?.clientCa !== undefined });
    const builtIn: Route[] = [
      {
        path: '/healthz',
        methods: ['GET'],
        open: true,
        handle: async () => {
          const health = this.allHealthy();
          return { status: health ? 200 : 503, body: { health } };
        },
      },
      {
        path: '/metrics',
        methods: ['GET'],
        open: true,
        handle: async () => ({
          status: 200,
          body: await this.registry.metrics(),
          headers: { 'content-type': this.registry.contentType },
        }),
      },
    ];
    for (const route of [...builtIn, ...routes]) this.table.set(route.path, route);
  }

  /** The port actually bound (when --server-port 0 asked the OS for one). */
  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? this.options.port;
  }

  async start(): Promise<void> {
    const handler = (req: IncomingMessage, res: ServerResponse) => void this.serve(req, res);
    const { tls } = this.options;
    // A client certificate is asked for but not demanded by TLS itself: the open routes stay open to probes
    // without one, and every other route checks it (ApiAccess).
    const server = tls
      ? https.createServer(
          {
            cert: tls.cert,
            key: tls.key,
            ...(tls.clientCa && { ca: tls.clientCa, requestCert: true, rejectUnauthorized: false }),
          },
          handler,
        )
      : http.createServer(handler);
    const headersTimeoutMs = this.options.headersTimeoutMs ?? 10_000;
    server.headersTimeout = headersTimeoutMs;
    server.requestTimeout = 30_000;
    // Counted where HTTP starts: after the handshake with TLS. The kernel-level cap also bounds handshakes.
    const silent = new WeakMap<Socket, NodeJS.Timeout>();
    server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => {
      if (++this.connections > this.options.maxConnections) this.pastCap.add(socket);
      // Node times out late headers only once a connection has sent something: one that sends nothing would
      // hold its place under the cap for good.
      silent.set(
        socket,
        setTimeout(() => socket.destroy(), headersTimeoutMs),
      );
      socket.once('close', () => {
        this.connections--;
        clearTimeout(silent.get(socket));
      });
    });
    server.on('request', (req: IncomingMessage) => clearTimeout(silent.get(req.socket as Socket)));
    server.maxConnections = 2 * this.options.maxConnections;
    this.server = server;
    server.listen(this.options.port, this.options.host);
    try {
      await Promise.race([once(server, 'listening'), once(server, 'error').then(([err]) => Promise.reject(err))]);
    } catch (err) {
      throw new OperationError(
        `cannot listen on ${this.options.host}:${this.options.port} (${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}); choose another --server-port`,
      );
    }
    this.logger.info('serving HTTP', {
      address: `${this.options.tls ? 'https' : 'http'}://${this.options.host}:${this.port}`,
    });
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let answer: RouteResponse;
    try {
      answer = await this.answer(req);
    } catch (err) {
      const notLeader = err instanceof NotLeaderError;
      const route = this.table.get(new URL(req.url ?? '', 'http://sidecar').pathname);
      if (notLeader && route?.forwardable && this.options.forward && !res.destroyed) {
        answer = await this.options.forward.forward(req, req.url ?? route.path);
        return this.send(res, answer);
      }
      if (!notLeader) this.logger.warn('request failed', { path: req.url?.split('?')[0], reason: errorMessage(err) });
      answer = notLeader
        ? { status: 503, body: { error: errorMessage(err), leader: null }, headers: RETRY_AFTER }
        : { status: 500, body: { error: errorMessage(err) } };
    }
    this.send(res, answer);
  }

  private send(res: ServerResponse, answer: RouteResponse): void {
    if (res.destroyed) return;
    const { body } = answer;
    const headers: Record<string, string> = { ...answer.headers };
    if (this.options.tls) {
      headers['strict-transport-security'] = 'max-age=31536000';
      headers['content-security-policy'] = "default-src 'self'";
    }
    let payload: string | Buffer = '';
    if (Buffer.isBuffer(body) || typeof body === 'string') {
      payload = body;
      headers['content-type'] ??= 'text/plain; charset=utf-8';
    } else if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['content-type'] ??= 'application/json';
    }
    res.writeHead(answer.status, headers).end(payload);
  }

  private async answer(req: IncomingMessage): Promise<RouteResponse> {
    let url: URL;
    try {
      url = new URL(req.url ?? '', 'http://sidecar');
    } catch {
      return { status: 400, body: { error: 'the request target is not a valid path' } };
    }
    const route = this.table.get(url.pathname);
    if (this.pastCap.has(req.socket) && route?.path !== '/healthz') {
      return {
        status: 503,
        body: { error: `the server has ${this.options.maxConnections} connections open (--server-max-connections)` },
        headers: { ...RETRY_AFTER, connection: 'close' },
      };
    }
    if (!route) return { status: 404, body: { error: `no such endpoint: ${url.pathname.slice(0, 200)}` } };
    const refusal = route.open ? undefined : this.access.refusal(req);
    if (refusal) return { status: 401, body: { error: refusal }, headers: { 'www-authenticate': 'Bearer' } };
    const method = req.method ?? '';
    if (!route.methods.includes(method)) {
      return {
        status: 405,
        body: { error: `${route.path} accepts ${route.methods.join(', ')}` },
        headers: { allow: route.methods.join(', ') },
      };
    }
    for (const name of url.searchParams.keys()) {
      if (!route.query?.includes(name)) {
        return { status: 400, body: { error: `${route.path} takes no query parameter "${name.slice(0, 100)}"` } };
      }
    }
    if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES || req.headers['transfer-encoding']) {
      return { status: 413, body: { error: `${route.path} takes no request body` } };
    }
    return route.handle(req, url.searchParams);
  }
}
