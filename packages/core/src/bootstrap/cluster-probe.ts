import { errorMessage } from '../common/errors.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { etcdAuthToken } from '../etcd/etcd-grpc.js';
import { type EtcdMember, memberList } from '../etcd/etcd-members.js';
import { memberStatus } from '../etcd/etcd-status.js';
import type { MemberConfig } from '../etcd/snapshot-restore-command.js';

/** What the other members say, through their client URLs (`--endpoints`). */
export type ClusterState =
  | {
      state: 'quorum';
      /** The member that answered with a leader: membership changes go through it. */
      endpoint: string;
      token?: string;
      /** The leader's id as that member named it (it may be a member that has just died: rejoin-as-learner.ts). */
      leader?: string;
      members: EtcdMember[];
    }
  /**
   * Some answered, but none has a leader: a membership change cannot commit. `members`: the list the first to
   * answer holds locally (etcd serves it without a leader), when it gave one.
   */
  | { state: 'no-quorum'; answered: string[]; members?: EtcdMember[] }
  /** None answered: the whole cluster is down (or lost). */
  | { state: 'unreachable'; failures: string[] };

/**
 * Asks each endpoint for its status until one reports a leader: a member with a leader is in the majority
 * (raft elects none without one), so a membership change sent to it can commit.
 */
export async function probeCluster(conn: EtcdConnection, timeoutMs = 5_000): Promise<ClusterState> {
  const answered: string[] = [];
  const failures: string[] = [];
  let firstToken: string | undefined;
  for (const endpoint of conn.endpoints) {
    try {
      const token = await etcdAuthToken(conn, endpoint);
      const status = await memberStatus(conn, { endpoint, token, timeoutMs });
      if (answered.push(endpoint) === 1) firstToken = token;
      if (status.leader === '0') continue;
      const members = await memberList(conn, { endpoint, token, timeoutMs });
      return { state: 'quorum', endpoint, token, leader: status.leader, members };
    } catch (err) {
      failures.push(errorMessage(err));
    }
  }
  if (answered.length === 0) return { state: 'unreachable', failures };
  const members = await memberList(conn, { endpoint: answered[0], token: firstToken, timeoutMs }).catch(
    () => undefined,
  );
  return { state: 'no-quorum', answered, ...(members ? { members } : {}) };
}

/** What names a member in a member list. */
export type MemberIdentity = Pick<MemberConfig, 'name' | 'initialAdvertisePeerUrls'>;

/** This member in a member list: by name, or (a learner that never started has none) by a peer URL. */
export function findMember(members: EtcdMember[], member: MemberIdentity): EtcdMember | undefined {
  const peers = peerUrlsOf(member);
  return members.find((m) => (m.name !== '' && m.name === member.name) || m.peerUrls.some((u) => peers.includes(u)));
}

export function peerUrlsOf(member: MemberIdentity): string[] {
  return member.initialAdvertisePeerUrls.split(',').map((u) => u.trim());
}

/**
 * A cluster that has never had a leader: no member it lists has published its client URLs (etcd publishes a
 * member's attributes through raft, so only once a leader exists; the names of `--initial-cluster` it has from
 * the start). Its members are starting for the first time.
 */
export function neverHadQuorum(cluster: ClusterState): boolean {
  return (
    cluster.state === 'no-quorum' &&
    cluster.members !== undefined &&
    cluster.members.every((m) => m.clientUrls.length === 0)
  );
}
