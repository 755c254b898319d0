import { errorMessage, OperationError } from '../common/errors.js';
import { type ProtoField, readFields, writeMessage } from '../common/protobuf-wire.js';
import type { EtcdConnection } from './etcd-client.js';
import { etcdAuthToken, grpcUnary } from './etcd-grpc.js';

export interface EtcdMember {
  /** uint64 as a decimal string, as etcd's status reports the leader. */
  id: string;
  /** Empty for a member added but not started yet. */
  name: string;
  peerUrls: string[];
  clientUrls: string[];
  isLearner: boolean;
}

/** Which member to ask (default: the first endpoint), and the auth token, if one was already issued there. */
export interface MemberCallOptions {
  endpoint?: string;
  token?: string;
  timeoutMs?: number;
}

/**
 * Cluster/MemberList over plain HTTP/2 (etcd-grpc.ts): `MemberListResponse{2 members: Member{1 ID, 2 name,
 * 3 peerURLs, 4 clientURLs, 5 isLearner}}`.
 */
export async function memberList(conn: EtcdConnection, options: MemberCallOptions = {}): Promise<EtcdMember[]> {
  const response = await clusterCall(conn, 'MemberList', Buffer.alloc(0), options);
  return readFields(response)
    .filter((f) => f.field === 2 && f.bytes)
    .map((f) => member(f.bytes!));
}

/**
 * Cluster/MemberAdd: `MemberAddRequest{1 peerURLs, 2 isLearner}` → `MemberAddResponse{2 member}`. A learner
 * (etcd 3.4+) receives the log but does not vote, so adding it cannot cost the cluster its quorum.
 */
export async function memberAdd(
  conn: EtcdConnection,
  peerUrls: string[],
  options: MemberCallOptions & { isLearner?: boolean } = {},
): Promise<EtcdMember> {
  const request = writeMessage([
    ...peerUrls.map((url) => [1, Buffer.from(url)] as const),
    [2, options.isLearner ? 1 : 0],
  ]);
  const response = await clusterCall(conn, 'MemberAdd', request, options);
  const added = readFields(response).find((f) => f.field === 2)?.bytes;
  if (!added) throw new OperationError(`etcd did not say which member it added for ${peerUrls.join(',')}`);
  return member(added);
}

/** Cluster/MemberRemove: `MemberRemoveRequest{1 ID}`. */
export async function memberRemove(conn: EtcdConnection, id: string, options: MemberCallOptions = {}): Promise<void> {
  await clusterCall(conn, 'MemberRemove', writeMessage([[1, BigInt(id)]]), options);
}

/** Cluster/MemberPromote (etcd 3.4+): `MemberPromoteRequest{1 ID}`; etcd refuses a learner that has not caught up. */
export async function memberPromote(conn: EtcdConnection, id: string, options: MemberCallOptions = {}): Promise<void> {
  await clusterCall(conn, 'MemberPromote', writeMessage([[1, BigInt(id)]]), options);
}

async function clusterCall(
  conn: EtcdConnection,
  method: string,
  request: Buffer,
  options: MemberCallOptions,
): Promise<Buffer> {
  const endpoint = options.endpoint ?? conn.endpoints[0];
  try {
    return await grpcUnary(conn, `/etcdserverpb.Cluster/${method}`, request, {
      endpoint,
      timeoutMs: options.timeoutMs ?? 10_000,
      token: options.token ?? (await etcdAuthToken(conn, endpoint)),
    });
  } catch (err) {
    throw new OperationError(`etcd at ${endpoint} refused ${method}: ${errorMessage(err)}`, { cause: err });
  }
}

function member(bytes: Buffer): EtcdMember {
  const fields = readFields(bytes);
  const strings = (n: number) => fields.filter((m) => m.field === n && m.bytes).map((m) => m.bytes!.toString('utf8'));
  return {
    id: String(varintOf(fields, 1)),
    name: strings(2)[0] ?? '',
    peerUrls: strings(3),
    clientUrls: strings(4),
    isLearner: varintOf(fields, 5) === 1n,
  };
}

function varintOf(fields: ProtoField[], n: number): bigint {
  return fields.find((f) => f.field === n)?.varint ?? 0n;
}
