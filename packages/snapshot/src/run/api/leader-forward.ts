import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import { errorMessage, http } from '@etcd-steward/core/common';
import { RETRY_AFTER, type RouteResponse } from '../component.js';
import type { Leadership } from '../leadership/leadership.js';

/** Marks a request one sidecar passed to another, so that it is never passed on twice. */
const FORWARDED = 'x-etcd-steward-forwarded';
const TIMEOUT_MS = 30 * 60_000;
const MAX_BODY = 1 << 20;

export interface LeaderForwardOptions {
  /** Every sidecar listens on the same port (ebr's assumption too). */
  serverPort: number;
  tls: boolean;
  /** CA to verify the leader's sidecar, when TLS is on. */
  ca?: Buffer;
  /** This server's certificate, shown to the leader's sidecar when its endpoints ask for client certificates. */
  clientCertificate?: { cert: Buffer; key: Buffer };
  /**
   * Requests passed on at once (--server-max-forwarded): each may wait for a full snapshot, up to 30 minutes, so
   * past it a request is answered 503 with Retry-After rather than held.
   */
  maxInFlight: number;
}

/**
 * A follower passes snapshot requests on to the leader's sidecar, as ebr does: at the leader's etcd client
 * host, on this server's port. When that fails, it answers 503 and says where the leader is.
 */
export class LeaderForward {
  private inFlight = 0;

  constructor(
    private readonly leadership: Leadership,
    private readonly options: LeaderForwardOptions,
  ) {}

  async forward(request: IncomingMessage, pathAndQuery: string): Promise<RouteResponse> {
    const leader = await this.leaderUrl().catch(() => undefined);
    const notLeader = (why: string): RouteResponse => ({
      status: 503,
      body: { error: `this sidecar does not take snapshots: ${why}`, leader: leader ?? null },
      headers: RETRY_AFTER,
    });
    if (!leader) return notLeader('the etcd leader is not known right now; try again');
    // Its own member leads, but may not be snapshotted: passed on, the request would come back here.
    const { status, suspension } = this.leadership;
    if (suspension !== undefined && status?.leader === status?.memberId) {
      return notLeader(`its etcd member leads the cluster, but snapshots from it are stopped: ${suspension}`);
    }
    if (request.headers[FORWARDED]) return notLeader('it is not the leader either; ask the leader directly');
    if (this.inFlight >= this.options.maxInFlight) {
      return notLeader(
        `it already passes ${this.options.maxInFlight} requests on to the leader (--server-max-forwarded); try again, or ask the leader directly`,
      );
    }
    this.inFlight++;
    try {
      return await this.send(new URL(pathAndQuery, leader), request.method ?? 'GET', request.headers.authorization);
    } catch (err) {
      return notLeader(`forwarding to the leader failed (${errorMessage(err)})`);
    } finally {
      this.inFlight--;
    }
  }

  /** The leader's sidecar, e.g. http://10.0.0.12:8080. */
  private async leaderUrl(): Promise<string | undefined> {
    const client = await this.leadership.leaderClientUrl();
    if (!client) return undefined;
    const { hostname } = new URL(client);
    const host = hostname.includes(':') ? `[${hostname}]` : hostname;
    return `${this.options.tls ? 'https' : 'http'}://${host}:${this.options.serverPort}`;
  }

  /** The caller's token (if any) goes along: the leader's sidecar decides, as it would for a direct request. */
  private send(url: URL, method: string, authorization: string | undefined): Promise<RouteResponse> {
    const transport = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const req = transport.request(url, {
        method,
        headers: { [FORWARDED]: '1', ...(authorization && { authorization }) },
        ca: this.options.ca,
        ...this.options.clientCertificate,
        timeout: TIMEOUT_MS,
      });
      req.on('timeout', () => req.destroy(new Error('no answer in time')));
      req.on('error', reject);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (bytes > MAX_BODY) return res.destroy(new Error('the answer is too large'));
          chunks.push(chunk);
        });
        res.on('error', reject);
        res.on('end', () => {
          const headers: Record<string, string> = {
            'content-type': String(res.headers['content-type'] ?? 'text/plain'),
          };
          // A 503 or 429 of the leader's says when to ask again; the caller must hear it too.
          const retryAfter = res.headers['retry-after'];
          if (retryAfter !== undefined) headers['retry-after'] = retryAfter;
          resolve({ status: res.statusCode ?? 502, body: Buffer.concat(chunks), headers });
        });
      });
      req.end();
    });
  }
}
