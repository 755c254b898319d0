import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Etcd3, IOptions } from 'etcd3';
import { UsageError } from '../common/errors.js';

/** The client's type, for code that takes one without loading etcd3 itself. */
export type { Etcd3 };

/** How to reach etcd: the same flags in every program (`--endpoints --cacert --cert --key`). */
export interface EtcdConnection {
  endpoints: string[];
  cacert?: string;
  cert?: string;
  key?: string;
  username?: string;
  password?: string;
  /** The contents of cacert, cert and key, read once (etcdConnection does), so that no call reads the files again. */
  tls?: TlsMaterial;
}

export interface TlsMaterial {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

/** The connection's TLS material: as read when the connection was made, or from its files now. */
export function tlsMaterial(conn: EtcdConnection): TlsMaterial {
  if (!conn.tls) {
    return {
      ca: conn.cacert ? readPem(conn.cacert, '--cacert') : undefined,
      cert: conn.cert ? readPem(conn.cert, '--cert') : undefined,
      key: conn.key ? readPem(conn.key, '--key') : undefined,
    };
  }
  // A connection handed to a child process arrives with Uint8Arrays (structured clone); gRPC wants Buffers.
  const buffer = (bytes?: Uint8Array) => (bytes && !Buffer.isBuffer(bytes) ? Buffer.from(bytes) : bytes);
  return { ca: buffer(conn.tls.ca), cert: buffer(conn.tls.cert), key: buffer(conn.tls.key) };
}

/** `--endpoints` as etcdctl takes it: URLs, or bare host:port meaning http://host:port; a port is required. */
export function parseEndpoints(raw: string | string[]): string[] {
  const list = (Array.isArray(raw) ? raw : [raw])
    .flatMap((s) => s.split(','))
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => (/^[a-z][a-z0-9+.-]*:\/\//i.test(s) ? s : `http://${s}`));
  if (list.length === 0)
    throw new UsageError('--endpoints is empty: give etcd client URLs, e.g. http://127.0.0.1:2379');
  for (const endpoint of list) {
    let url: URL;
    try {
      url = new URL(endpoint);
    } catch {
      throw new UsageError(
        `--endpoints: "${endpoint}" is not a URL; write it as host:port, http://host:port or https://host:port`,
      );
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new UsageError(`--endpoints: "${endpoint}" must use http:// or https://`);
    }
    // Not echoed: user info may hold a password.
    if (url.username || url.password) {
      throw new UsageError(
        '--endpoints: an endpoint holds user info (user:password@); give the user with --user and the password with --password-file',
      );
    }
    // gRPC dials host and port alone: without a port it would dial 80 (443), never etcd's 2379, and would drop a
    // path or query without a word, so either is a mistake to say now.
    const authority = endpoint.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').split(/[/?#]/)[0];
    if (!/:\d+$/.test(authority)) {
      throw new UsageError(
        `--endpoints: "${endpoint}" has no port; etcd's client port is usually 2379: write ${url.protocol}//${url.hostname}:2379`,
      );
    }
    if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
      throw new UsageError(
        `--endpoints: "${endpoint}" has a path, query or fragment, which etcd's gRPC does not use: write ${url.protocol}//${url.host}`,
      );
    }
  }
  return list;
}

/**
 * An etcd client with the limits raised that etcd3's defaults get wrong: a watch catching up sends up to
 * 1000 revisions per message, past gRPC's 4 MB receive limit, and stalls silently without this.
 */
export function createEtcdClient(conn: EtcdConnection): Etcd3 {
  const options: IOptions = {
    hosts: conn.endpoints,
    grpcOptions: {
      'grpc.max_receive_message_length': -1,
      'grpc.max_send_message_length': -1,
    },
  };
  const tls = conn.endpoints.some((e) => e.startsWith('https:')) || conn.cacert || conn.cert;
  if (tls) {
    if ((conn.cert === undefined) !== (conn.key === undefined)) {
      throw new UsageError('--cert and --key go together: give both for client-certificate auth, or neither');
    }
    const { ca, cert, key } = tlsMaterial(conn);
    // Without --cacert, gRPC trusts the system's roots.
    options.credentials = { rootCertificate: (ca ?? null) as Buffer, privateKey: key, certChain: cert };
  }
  if (conn.username) options.auth = { username: conn.username, password: conn.password ?? '' };
  // Loaded on first use: etcd3 with grpc-js and its protobuf schemas costs ~45 MB, which programs that only
  // stream a snapshot (etcd-grpc.ts) never pay.
  const { Etcd3: Client } = createRequire(import.meta.url)('etcd3') as typeof import('etcd3');
  return new Client(options);
}

function readPem(path: string, flag: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new UsageError(`${flag} ${path}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? err})`);
  }
}
