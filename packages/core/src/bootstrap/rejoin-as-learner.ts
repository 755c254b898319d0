import { setTimeout as sleep } from 'node:timers/promises';
import { Backoff } from '../common/backoff.js';
import { errorMessage, OperationError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { etcdAuthToken } from '../etcd/etcd-grpc.js';
import { memberAdd, memberRemove } from '../etcd/etcd-members.js';
import { memberStatus } from '../etcd/etcd-status.js';
import type { MemberConfig } from '../etcd/snapshot-restore-command.js';
import { type ClusterState, findMember, peerUrlsOf } from './cluster-probe.js';
import { isEmptyDir, moveAside } from './move-aside.js';

export interface Rejoined {
  removedId?: string;
  movedAside?: string;
  learnerId: string;
  /** What etcd must start with: the cluster as it is now, this member included. */
  initialCluster: string;
}

/**
 * A member whose data cannot be used leaves the cluster and comes back empty, as a learner: removed (by name or
 * peer URL), its data moved aside, added back with its peer URLs. etcd then starts it with
 * `--initial-cluster-state existing` and the leader sends it a snapshot; it votes once promoted
 * (promote-learner.ts). Safe to run again after a crash at any step: a member already removed is not removed
 * twice, an empty data dir is not moved, and a learner left by an earlier run is replaced.
 */
export async function rejoinAsLearner(
  conn: EtcdConnection,
  cluster: Extract<ClusterState, { state: 'quorum' }>,
  member: MemberConfig,
  dataDir: string,
  logger: Logger,
  signal?: AbortSignal,
): Promise<Rejoined> {
  const old = findMember(cluster.members, member);
  const call =
    old && cluster.leader === old.id
      ? await anotherLeader(conn, old.id, logger, signal)
      : { endpoint: cluster.endpoint, token: cluster.token };
  if (old) {
    logger.info('removing this member from the cluster', { member: member.name, id: old.id });
    await whenHealthy(() => memberRemove(conn, old.id, call), signal);
  }
  const movedAside = (await isEmptyDir(dataDir)) ? undefined : await moveAside(dataDir);
  if (movedAside) logger.info('moved the data dir aside', { from: dataDir, to: movedAside });
  const learner = await whenHealthy(() => memberAdd(conn, peerUrlsOf(member), { ...call, isLearner: true }), signal);
  logger.info('added this member back as a learner', { member: member.name, id: learner.id });
  const others = cluster.members.filter((m) => m.id !== old?.id && m.id !== learner.id);
  const initialCluster = [
    ...others.flatMap((m) => m.peerUrls.map((url) => `${m.name}=${url}`)),
    ...peerUrlsOf(member).map((url) => `${member.name}=${url}`),
  ].join(',');
  return {
    ...(old ? { removedId: old.id } : {}),
    ...(movedAside ? { movedAside } : {}),
    learnerId: learner.id,
    initialCluster,
  };
}

/** How long a member that led before its data was lost waits for the others to elect another leader. */
const ELECTION_WAIT_MS = 30_000;

/**
 * A member whose data was lost while it led: the others go on naming it their leader until their election timeout
 * passes (etcd's default is a second; etcd-wrapper asks for the initialization within 0.3 s of the kill), and a
 * MemberRemove sent meanwhile waits for that leader until it times out (10 s), the initialization fails and starts
 * over. So first wait until one of them names another leader, and change the membership through it.
 */
async function anotherLeader(
  conn: EtcdConnection,
  gone: string,
  logger: Logger,
  signal?: AbortSignal,
): Promise<{ endpoint: string; token?: string }> {
  logger.info('this member led the cluster: waiting for the others to elect another leader first', { id: gone });
  const deadline = Date.now() + ELECTION_WAIT_MS;
  for (;;) {
    for (const endpoint of conn.endpoints) {
      const asked = await (async () => {
        const token = await etcdAuthToken(conn, endpoint);
        const status = await memberStatus(conn, { endpoint, token, timeoutMs: 2_000 });
        return status.leader !== '0' && status.leader !== gone ? { endpoint, token } : undefined;
      })().catch(() => undefined);
      if (asked) return asked;
    }
    if (Date.now() >= deadline) {
      throw new OperationError(
        `the other members still name this member (id ${gone}) their leader after ${ELECTION_WAIT_MS / 1000} s, or have none: they cannot remove it; check that a majority of them runs, then run again`,
      );
    }
    await sleep(200, undefined, { signal });
  }
}

/** How long a membership change waits for etcd to call the cluster healthy again. */
const HEALTHY_WAIT_MS = 30_000;

/**
 * etcd's strict reconfiguration check refuses a membership change ("unhealthy cluster", "not enough started
 * members") until the voting members it counts have been connected to the one asked for 5 s, as right after a
 * member (re)started, and etcd takes one learner at a time ("too many learner members": a scale-up's previous new
 * member not yet promoted): asked again for a while.
 */
async function whenHealthy<T>(change: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const deadline = Date.now() + HEALTHY_WAIT_MS;
  const backoff = new Backoff({ baseDelayMs: 250, maxDelayMs: 2_000 });
  for (;;) {
    try {
      return await change();
    } catch (err) {
      if (
        !/unhealthy cluster|not enough started members|too many learner members/.test(errorMessage(err)) ||
        Date.now() >= deadline
      )
        throw err;
    }
    await backoff.wait(signal);
  }
}
