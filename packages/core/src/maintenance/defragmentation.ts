import { errorMessage, OperationError } from '../common/errors.js';
import { formatBytes } from '../common/format-bytes.js';
import type { Logger } from '../common/logger.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { defragmentMember } from '../etcd/etcd-maintenance.js';
import { memberList } from '../etcd/etcd-members.js';
import { type EtcdStatus, memberStatus } from '../etcd/etcd-status.js';

export interface DefragmentationOptions {
  /** A member whose db has less than this to give back (dbSize − dbSizeInUse) is left alone. */
  minReclaimBytes: number;
  /** The longest one member's defragmentation may take. */
  timeoutMs: number;
  logger: Logger;
  /** Aborted: stop before the next member (one being defragmented finishes: etcd cannot be interrupted). */
  signal?: AbortSignal;
  statusTimeoutMs?: number;
}

/** What happened to one member. */
export interface MemberDefragmentation {
  memberId: string;
  name: string;
  endpoint: string;
  leader: boolean;
  /** dbSize before, and after when it was defragmented. */
  dbBytesBefore: number;
  dbBytesAfter?: number;
  /** Set when the member was left alone, saying why. */
  skipped?: string;
  /** Epoch ms, while etcd defragmented it. */
  startedAt?: number;
  endedAt?: number;
}

interface Member {
  memberId: string;
  name: string;
  endpoint: string;
  status: EtcdStatus;
}

/**
 * Defragments every member of the cluster, one at a time: the followers first and the leader last, so that
 * the cluster keeps a leader and a quorum answering while each member is busy. Each member is checked just
 * before its turn, and the run stops when any member is unhealthy (a member busy with defragmentation while
 * another is down could cost the quorum). Members with little to reclaim are skipped. Callers hold the etcd
 * lock so that no two runs (two sidecars after a leader change) overlap.
 */
export async function defragmentCluster(
  conn: EtcdConnection,
  options: DefragmentationOptions,
): Promise<MemberDefragmentation[]> {
  const { logger } = options;
  const plan = order(await healthyMembers(conn, options));
  logger.info('defragmentation planned', { order: plan.map((m) => m.name || m.memberId) });
  const results: MemberDefragmentation[] = [];
  for (const planned of plan) {
    options.signal?.throwIfAborted();
    // Sizes and health as they are now: the previous member's turn took time.
    const members = await healthyMembers(conn, options);
    const member = members.find((m) => m.memberId === planned.memberId);
    if (!member) throw new OperationError(`member ${planned.name} left the cluster during defragmentation`);
    const { dbSize, dbSizeInUse, leader } = member.status;
    const result: MemberDefragmentation = {
      memberId: member.memberId,
      name: member.name,
      endpoint: member.endpoint,
      leader: leader === member.memberId,
      dbBytesBefore: dbSize,
    };
    results.push(result);
    const reclaimable = dbSize - dbSizeInUse;
    // etcd 3.3 and older report no dbSizeInUse: nothing tells how much is free, so the member is defragmented.
    if (dbSizeInUse > 0 && reclaimable < options.minReclaimBytes) {
      result.skipped = `only ${formatBytes(reclaimable)} to reclaim (--defrag-min-reclaim ${formatBytes(options.minReclaimBytes)})`;
      logger.info('defragmentation skipped for member', { member: member.name, reason: result.skipped });
      continue;
    }
    logger.info('defragmenting member', {
      member: member.name,
      leader: result.leader,
      dbBytes: dbSize,
      reclaimableBytes: reclaimable,
    });
    result.startedAt = Date.now();
    try {
      await defragmentMember(conn, { endpoint: member.endpoint, timeoutMs: options.timeoutMs });
    } finally {
      result.endedAt = Date.now();
    }
    result.dbBytesAfter = (
      await memberStatus(conn, { endpoint: member.endpoint, timeoutMs: options.statusTimeoutMs })
    ).dbSize;
    logger.info('member defragmented', {
      member: member.name,
      dbBytesBefore: dbSize,
      dbBytesAfter: result.dbBytesAfter,
      reclaimedBytes: dbSize - result.dbBytesAfter,
      seconds: (result.endedAt - result.startedAt) / 1000,
    });
  }
  return results;
}

/** Followers first, the leader last. */
function order(members: Member[]): Member[] {
  const isLeader = (m: Member) => m.status.leader === m.memberId;
  return [...members.filter((m) => !isLeader(m)), ...members.filter(isLeader)];
}

/** Every voting member and its status; an OperationError naming the first that does not answer or has no leader. */
async function healthyMembers(conn: EtcdConnection, options: DefragmentationOptions): Promise<Member[]> {
  const timeoutMs = options.statusTimeoutMs ?? 5_000;
  const list = await memberList(conn, { timeoutMs });
  return Promise.all(
    list.map(async (m) => {
      const endpoint = m.clientUrls[0];
      const name = m.name || m.id;
      if (!endpoint || m.isLearner) {
        throw new OperationError(
          `member ${name} is not started or still a learner: defragmentation waits for a healthy cluster`,
        );
      }
      let status: EtcdStatus;
      try {
        status = await memberStatus(conn, { endpoint, timeoutMs });
      } catch (err) {
        throw new OperationError(
          `member ${name} is unhealthy (${errorMessage(err)}): defragmentation waits for a healthy cluster`,
        );
      }
      if (status.leader === '0') throw new OperationError(`member ${name} has no leader: defragmentation waits`);
      return { memberId: m.id, name: m.name, endpoint, status };
    }),
  );
}
