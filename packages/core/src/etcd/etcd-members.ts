import { errorMessage, OperationError } from '../common/errors.js';
import { type ProtoField, readFields } from '../common/protobuf-wire.js';
import type { EtcdConnection } from './etcd-client.js';
import { etcdAuthToken, grpcUnary } from './etcd-grpc.js';

export interface EtcdMember {
  /** uint64 as a decimal string, as etcd's status reports the leader. */
  id: string;
  name: string;
  peerUrls: string[];
  clientUrls: string[];
  isLearner: boolean;
}

/**
 * Cluster/MemberList over plain HTTP/2 (etcd-grpc.ts): `MemberListResponse{2 members: Member{1 ID, 2 name,
 * 3 peerURLs, 4 clientURLs, 5 isLearner}}`.
 */
export async function memberList(conn: EtcdConnection, options: { timeoutMs?: number } = {}): Promise<EtcdMember[]> {
  let response: Buffer;
  try {
    response = await grpcUnary(conn, '/etcdserverpb.Cluster/MemberList', Buffer.alloc(0), {
      timeoutMs: options.timeoutMs ?? 10_000,
      token: await etcdAuthToken(conn),
    });
  } catch (err) {
    throw new OperationError(`cannot list etcd's members at ${conn.endpoints[0]}: ${errorMessage(err)}`, {
      cause: err,
    });
  }
  return readFields(response)
    .filter((f) => f.field === 2 && f.bytes)
    .map((f) => {
      const member = readFields(f.bytes!);
      const strings = (n: number) =>
        member.filter((m) => m.field === n && m.bytes).map((m) => m.bytes!.toString('utf8'));
      return {
        id: String(varintOf(member, 1)),
        name: strings(2)[0] ?? '',
        peerUrls: strings(3),
        clientUrls: strings(4),
        isLearner: varintOf(member, 5) === 1n,
      };
    });
}

function varintOf(fields: ProtoField[], n: number): bigint {
  return fields.find((f) => f.field === n)?.varint ?? 0n;
}
