/**
 * An HTTP proxy between a store client and its test server that makes a share of requests fail the ways
 * networks and object stores do:
 * - `503`:           the body is read, then 503 Service Unavailable (throttling, overloaded front end);
 * - `reset`:         the connection is destroyed before the request is forwarded;
 * - `lost-response`: the request is forwarded and done by the server, then the connection is destroyed
 *                    before the client hears back (the client cannot tell whether it happened);
 * - `cut-response`:  the response starts, then the connection is destroyed midway through its body;
 * - `stall`:         the request waits `stallMs` before it is forwarded (a slow server);
 * - `hang`:          nothing is ever answered, until the client gives up (needs a client timeout).
 * Headers pass through unchanged (Host included), so signed requests stay valid. `answer` lets a test answer
 * chosen requests itself, as the real service would where the test server cannot (an error it never gives).
 */
import { Agent, createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { seededRandom } from '@etcd-steward/testing';
import { closeServer, listenOnLoopback, type TestServer } from './test-server.ts';

export type FaultKind = '503' | 'reset' | 'lost-response' | 'cut-response' | 'stall' | 'hang';

export interface FaultProxyOptions {
  /** Upstream base URL, e.g. http://127.0.0.1:9000 */
  target: string;
  /** Share of requests that get a fault, 0..1. */
  failureRate?: number;
  faults?: FaultKind[];
  stallMs?: number;
  /** Makes the sequence of faults repeatable. */
  seed?: number;
  /** Only requests with these methods get faults (default: all), e.g. PUT and POST to hold uploads alone. */
  methods?: string[];
  /** An answer for a request, instead of forwarding it; undefined: forward (or fault) as usual. */
  answer?: (req: IncomingMessage) => { status: number; headers?: Record<string, string>; body?: string } | undefined;
}

export interface FaultProxy extends TestServer {
  failureRate: number;
  /** The kinds of fault drawn from; a test may change them (and failureRate) while the proxy runs. */
  faults: FaultKind[];
  readonly stats: { requests: number; faults: Record<FaultKind, number> };
}

const DEFAULT_FAULTS: FaultKind[] = ['503', 'reset', 'lost-response', 'cut-response', 'stall'];

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const target = new URL(options.target);
  const stallMs = options.stallMs ?? 300;
  const random = seededRandom(options.seed ?? 1);
  const agent = new Agent({ keepAlive: true });
  const stats = {
    requests: 0,
    faults: { '503': 0, reset: 0, 'lost-response': 0, 'cut-response': 0, stall: 0, hang: 0 } as Record<
      FaultKind,
      number
    >,
  };
  const proxy: FaultProxy = {
    endpoint: '',
    failureRate: options.failureRate ?? 0,
    faults: options.faults ?? DEFAULT_FAULTS,
    stats,
    stop: async () => {},
  };

  const server = createServer((req, res) => {
    stats.requests++;
    const answer = options.answer?.(req);
    if (answer) {
      req.resume();
      req.on('end', () => res.writeHead(answer.status, answer.headers).end(answer.body));
      return;
    }
    const eligible = !options.methods || options.methods.includes(req.method ?? '');
    const fault =
      eligible && random() < proxy.failureRate ? proxy.faults[Math.floor(random() * proxy.faults.length)] : undefined;
    if (fault) stats.faults[fault]++;
    switch (fault) {
      case '503':
        req.resume();
        req.on('end', () => {
          res
            .writeHead(503, { 'content-type': 'text/plain', connection: 'close' })
            .end('Service Unavailable (fault proxy)');
        });
        return;
      case 'reset':
        req.socket.destroy();
        return;
      case 'hang':
        req.resume();
        return;
      case 'stall':
        req.pause();
        setTimeout(() => forward(req, res), stallMs);
        return;
      default:
        forward(req, res, fault);
    }
  });

  function forward(req: IncomingMessage, res: ServerResponse, fault?: FaultKind): void {
    const upstream = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
        agent,
      },
      (response) => {
        if (fault === 'lost-response') {
          response.resume();
          response.on('end', () => req.socket.destroy());
          return;
        }
        res.writeHead(response.statusCode ?? 502, response.headers);
        if (fault === 'cut-response') {
          response.once('data', (chunk: Buffer) => {
            res.write(chunk.subarray(0, Math.ceil(chunk.length / 2)));
            response.destroy();
            req.socket.destroy();
          });
          response.once('end', () => req.socket.destroy());
          return;
        }
        response.pipe(res);
        response.on('error', () => res.destroy());
      },
    );
    upstream.on('error', () => res.destroy());
    req.on('aborted', () => upstream.destroy());
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }

  proxy.endpoint = await listenOnLoopback(server);
  proxy.stop = async () => {
    await closeServer(server);
    agent.destroy();
  };
  return proxy;
}
