import type { IncomingMessage } from 'node:http';
import type { Logger } from '@etcd-steward/core/common';
import type { Registry } from 'prom-client';

/** What a route handler answers; `body` objects go out as JSON, strings as plain text. */
export interface RouteResponse {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** One HTTP endpoint a component serves. Query parameters not listed are refused. */
export interface Route {
  path: string;
  methods: readonly string[];
  query?: readonly string[];
  /**
   * Anyone may call it, even with --server-token-file or --server-tls-client-ca: only for what reads and changes
   * nothing (/healthz, /metrics, /snapshot/latest). Every other route asks for the token or client certificate
   * configured, so that a new route is never left open by omission.
   */
  open?: true;
  /**
   * Acted on by the leader's sidecar only: when the handler throws NotLeaderError, a follower passes the request
   * on to the leader's sidecar (the API's LeaderForward) instead of answering 503.
   */
  forwardable?: true;
  handle(request: IncomingMessage, query: URLSearchParams): Promise<RouteResponse>;
}

/** A 503 while no sidecar can take the request says when to ask again: about one leadership check later. */
export const RETRY_AFTER = { 'retry-after': '5' };

/** What every component is given: its own metrics registry (the API serves them all together) and the log. */
export interface ComponentContext {
  registry: Registry;
  logger: Logger;
}

/**
 * One running piece of the sidecar (the snapshotter, the HTTP server, a lease renewal, ...), made by the sidecar
 * part whose flags switch it on (sidecar-part.ts). It registers its metrics on its part's registry when it is
 * made, and offers its own routes; the sidecar starts them in order and stops them in reverse.
 */
export interface Component {
  readonly name: string;
  readonly routes?: readonly Route[];
  start(): Promise<void>;
  /** Ends the component's work, finishing what must not be left half-done. */
  stop(): Promise<void>;
  /** false when the component cannot do its job; /healthz reports the conjunction. */
  healthy?(): boolean;
}

export async function startAll(components: readonly Component[], logger: Logger): Promise<void> {
  for (const c of components) {
    await c.start();
    logger.info('component started', { component: c.name });
  }
}

export async function stopAll(components: readonly Component[], logger: Logger): Promise<void> {
  for (const c of [...components].reverse()) {
    try {
      await c.stop();
    } catch (err) {
      logger.error('component failed to stop cleanly', { component: c.name, reason: (err as Error).message });
    }
  }
}
