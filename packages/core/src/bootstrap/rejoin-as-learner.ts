import { Backoff } from '../common/backoff.js';
import { errorMessage } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { memberAdd, memberRemove } from '../etcd/etcd-members.js';
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
  const call = { endpoint: cluster.endpoint, token: cluster.token };
  const old = findMember(cluster.members, member);
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
