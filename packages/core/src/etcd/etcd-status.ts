import { errorMessage, OperationError, UsageError } from '../common/errors.js';
import { readFields } from '../common/protobuf-wire.js';
import type { EtcdConnection } from './etcd-client.js';
import { etcdAuthToken, grpcUnary } from './etcd-grpc.js';

export interface EtcdStatus {
  version: string;
  dbSize: number;
  /** Bytes of the db that hold data (etcd 3.4+); dbSize minus this is what a defragmentation gives back. */
  dbSizeInUse: number;
  /** Member IDs are uint64: decimal strings. */
  leader: string;
  memberId: string;
  /** The cluster's ID, a uint64 as a decimal string. */
  clusterId: string;
  revision: number;
}

/**
 * Maintenance/Status of one member (the first endpoint unless named), within `timeoutMs`: the first call
 * a program makes, so that an unreachable etcd is one clear error instead of a client retrying in silence.
 */
export async function memberStatus(
  conn: EtcdConnection,
  options: { endpoint?: string; timeoutMs?: number; token?: string } = {},
): Promise<EtcdStatus> {
  const endpoint = options.endpoint ?? conn.endpoints[0];
  let response: Buffer;
  try {
    response = await grpcUnary(conn, '/etcdserverpb.Maintenance/Status', Buffer.alloc(0), {
      endpoint,
      timeoutMs: options.timeoutMs ?? 10_000,
      token: options.token,
    });
  } catch (err) {
    throw new OperationError(
      `cannot reach etcd at ${endpoint}: ${errorMessage(err).replace(/^etcd at \S+: /, '')}; check --endpoints (and --cacert/--cert/--key for TLS) and that etcd is running`,
      { cause: err },
    );
  }
  const fields = readFields(response);
  const header = readFields(fields.find((f) => f.field === 1)?.bytes ?? Buffer.alloc(0));
  const varint = (list: typeof fields, n: number) => list.find((f) => f.field === n)?.varint ?? 0n;
  return {
    version: fields.find((f) => f.field === 2)?.bytes?.toString('utf8') ?? 'unknown',
    dbSize: Number(varint(fields, 3)),
    dbSizeInUse: Number(varint(fields, 9)),
    leader: String(varint(fields, 4)),
    memberId: String(varint(header, 2)),
    clusterId: String(varint(header, 1)),
    revision: Number(varint(header, 3)),
  };
}

/** A member that answered: where, what it said, and (with a user) the auth token it issued. */
export interface ReachedMember {
  endpoint: string;
  status: EtcdStatus;
  token?: string;
}

/**
 * The first of `--endpoints` that answers, so that one member down does not stop a snapshot. A wrong user
 * or password stops at once: every member would refuse it alike.
 */
export async function reachMember(conn: EtcdConnection, timeoutMs?: number): Promise<ReachedMember> {
  const failures: OperationError[] = [];
  for (const endpoint of conn.endpoints) {
    let token: string | undefined;
    try {
      token = await etcdAuthToken(conn, endpoint);
    } catch (err) {
      if (/gRPC status/.test(errorMessage(err))) {
        throw new UsageError(`etcd refused user ${conn.username}: ${errorMessage(err)}; check --user and the password`);
      }
    }
    try {
      return { endpoint, token, status: await memberStatus(conn, { endpoint, token, timeoutMs }) };
    } catch (err) {
      if (!(err instanceof OperationError)) throw err;
      failures.push(err);
    }
  }
  if (failures.length === 1) throw failures[0];
  throw new OperationError(
    `cannot reach etcd at any of ${conn.endpoints.join(', ')}: ${failures.map((f) => f.message).join(' | ')}`,
  );
}
