import http2 from 'node:http2';
import { Transform, type TransformCallback } from 'node:stream';
import { ByteQueue } from '../common/byte-queue.js';
import { OperationError } from '../common/errors.js';
import { youngCollections } from '../common/memory-bound.js';
import { readFields, writeMessage } from '../common/protobuf-wire.js';
import { type EtcdConnection, tlsMaterial } from './etcd-client.js';

/*
 * A few etcd calls over plain HTTP/2 with hand-read messages, for the paths that must be fast and small:
 * the general gRPC client (etcd3 → grpc-js → protobufjs) costs ~45 MB of memory to load and decodes a
 * snapshot at ~165 MB/s here, where this reads it at ~250 MB/s — faster than etcdctl.
 */

/** HTTP/2 flow control's window, for the connection and its stream, unless a call sets its own. */
const WINDOW = 4 << 20;

/**
 * For a long-running caller whose memory counts for longer than a stream's speed (the sidecar's watch and full
 * snapshots): the socket's read buffers (64 KiB each, kept whole by every DATA frame cut from one) received between
 * young-generation collections (memory-bound.ts, youngCollections). etcd's streams arrive ~10 KB a read here: the
 * sidecar's memory peaked at 40–43 MB with this, 44–51 without; a 455 MB full snapshot took ~15% more CPU, and
 * `etcd-snapshot save`, which runs without it, would have peaked 10–18 MB higher (docs/performance.md).
 */
export const LEAN_READ_BUFFERS = 1 << 20;

export interface GrpcCall {
  /** gRPC message payloads as they arrive (object mode: one Buffer a message), or what `decode` makes of them. */
  messages: Transform;
  close(): void;
}

export interface GrpcCallOptions {
  signal?: AbortSignal;
  endpoint?: string;
  token?: string;
  /**
   * Response messages decoded ahead of a reader that is slower than etcd (64 unless set). Besides these, HTTP/2
   * flow control lets etcd send up to 4 MiB more before it waits.
   */
  readAhead?: number;
  /** How much etcd may send ahead of the reader (HTTP/2 flow control), if not 4 MiB. */
  windowBytes?: number;
  /** Reads the response body (gRPC's length-prefixed frames) itself, for a caller that must not assemble each message first. */
  decode?: (endpoint: string) => Transform;
  /** Collects the young generation every this many bytes of the socket's read buffers (LEAN_READ_BUFFERS). */
  readBuffersPerCollection?: number;
}

/** Starts a call with one request message; the response messages stream out of `messages`. */
export function grpcCall(conn: EtcdConnection, path: string, request: Buffer, options: GrpcCallOptions = {}): GrpcCall {
  const endpoint = options.endpoint ?? conn.endpoints[0];
  const window = options.windowBytes ?? WINDOW;
  const session = http2.connect(endpoint, {
    settings: { initialWindowSize: window },
    ...(endpoint.startsWith('https:') ? tlsMaterial(conn) : {}),
  });
  const messages = options.decode?.(endpoint) ?? new GrpcFrames(endpoint, options.readAhead ?? 64);
  const close = () => {
    session.destroy();
  };
  const fail = (err: Error) => {
    // http2 wraps the socket's error ("The pending stream has been canceled"); the cause says what happened.
    const reason = err.cause instanceof Error ? err.cause.message : err.message;
    messages.destroy(new OperationError(`etcd at ${endpoint}: ${reason}`, { cause: err }));
    close();
  };
  session.on('error', fail);
  // A call that timed out before the connection was made has destroyed the session already.
  session.on('connect', () => {
    if (!session.destroyed) session.setLocalWindowSize(window);
  });
  const req = session.request(
    {
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...(options.token ? { token: options.token } : {}),
    },
    { signal: options.signal },
  );
  req.on('error', fail);
  const checkStatus = (headers: http2.IncomingHttpHeaders) => {
    const status = headers['grpc-status'];
    if (status !== undefined && status !== '0') {
      const message = decodeURIComponent(String(headers['grpc-message'] ?? ''));
      fail(new Error(`${path} failed (gRPC status ${status}): ${message}`));
    }
  };
  req.on('response', checkStatus);
  req.on('trailers', checkStatus);
  req.on('end', () => session.close());
  const frame = Buffer.alloc(5);
  frame.writeUInt32BE(request.length, 1);
  req.end(Buffer.concat([frame, request]));
  req.pipe(messages);
  if (options.readBuffersPerCollection) req.on('data', youngCollections(options.readBuffersPerCollection));
  messages.on('close', close);
  return { messages, close };
}

/** A unary call: the one response message. */
export async function grpcUnary(
  conn: EtcdConnection,
  path: string,
  request: Buffer,
  options: { timeoutMs?: number; endpoint?: string; token?: string } = {},
): Promise<Buffer> {
  const signal = AbortSignal.timeout(options.timeoutMs ?? 10_000);
  const call = grpcCall(conn, path, request, { signal, endpoint: options.endpoint, token: options.token });
  const endpoint = options.endpoint ?? conn.endpoints[0];
  let response: Buffer | undefined;
  try {
    for await (const message of call.messages) response = message as Buffer;
  } catch (err) {
    if (!signal.aborted) throw err;
  } finally {
    call.close();
  }
  if (signal.aborted)
    throw new OperationError(`etcd at ${endpoint}: no answer within ${(options.timeoutMs ?? 10_000) / 1000}s`);
  if (!response) throw new OperationError(`etcd at ${endpoint} sent no response to ${path}`);
  return response;
}

/**
 * The auth token for a connection with a user (etcd's Auth/Authenticate), else undefined. The general
 * client's snapshot call drops it (docs/developer.md, Talking to etcd); ours sends it with every call.
 */
export async function etcdAuthToken(conn: EtcdConnection, endpoint = conn.endpoints[0]): Promise<string | undefined> {
  if (!conn.username) return undefined;
  const request = writeMessage([
    [1, Buffer.from(conn.username)],
    [2, Buffer.from(conn.password ?? '')],
  ]);
  const response = await grpcUnary(conn, '/etcdserverpb.Auth/Authenticate', request, { endpoint });
  const token = readFields(response)
    .find((f) => f.field === 2)
    ?.bytes?.toString('utf8');
  if (!token) throw new OperationError(`etcd at ${endpoint} returned no auth token for user ${conn.username}`);
  return token;
}

/** gRPC's length-prefixed frames in, one Buffer a message out. */
class GrpcFrames extends Transform {
  /**
   * A message that spans chunks is copied alone (byte-queue.ts): a copy of all that is pending would keep every
   * message in it alive as long as the one read last (in a watch catching up, megabytes for as long as their
   * events take to write).
   */
  private readonly pending = new ByteQueue();

  constructor(
    private readonly endpoint: string,
    readAhead: number,
  ) {
    super({ readableObjectMode: true, readableHighWaterMark: readAhead });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.pending.push(chunk);
    while (this.pending.length >= 5) {
      const head = this.pending.peek(5);
      if (head[0] !== 0) return done(new OperationError(`etcd at ${this.endpoint} sent a compressed gRPC message`));
      const length = head.readUInt32BE(1);
      if (this.pending.length < 5 + length) break;
      this.push(this.pending.take(5 + length).subarray(5));
    }
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.pending.length > 0) return done(new OperationError(`the stream from ${this.endpoint} ended mid-message`));
    done();
  }
}
