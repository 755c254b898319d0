import { Backoff } from '../common/backoff.js';
import { errorMessage, OperationError, UsageError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { memberList, memberPromote } from '../etcd/etcd-members.js';
import { findMember, type MemberIdentity, probeCluster } from './cluster-probe.js';

/**
 * Makes a learner that bootstrap added a voting member once it has caught up: etcd refuses to promote a learner
 * whose log is behind the leader's, so this asks again, with growing waits, until etcd agrees or `timeoutMs`
 * passes. A member that already votes is left as it is. Returns the member's id.
 */
export async function promoteLearner(options: {
  connection: EtcdConnection;
  member: MemberIdentity;
  timeoutMs: number;
  logger: Logger;
  signal?: AbortSignal;
}): Promise<{ id: string; promoted: boolean }> {
  const { connection, logger } = options;
  const { member } = options;
  const deadline = Date.now() + options.timeoutMs;
  const backoff = new Backoff({ baseDelayMs: 500, maxDelayMs: 5_000 });
  let last = '';
  for (;;) {
    options.signal?.throwIfAborted();
    const cluster = await probeCluster(connection);
    if (cluster.state === 'quorum') {
      const found = findMember(cluster.members, member);
      if (!found) {
        throw new UsageError(
          `member ${member.name} (${member.initialAdvertisePeerUrls}) is not in the cluster at ${cluster.endpoint}: check --name and --initial-advertise-peer-urls`,
        );
      }
      if (!found.isLearner) return { id: found.id, promoted: false };
      try {
        await memberPromote(connection, found.id, { endpoint: cluster.endpoint, token: cluster.token });
        logger.info('promoted the learner to a voting member', { member: member.name, id: found.id });
        const after = findMember(
          await memberList(connection, { endpoint: cluster.endpoint, token: cluster.token }),
          member,
        );
        return { id: after?.id ?? found.id, promoted: true };
      } catch (err) {
        last = errorMessage(err);
      }
    } else {
      last = cluster.state === 'no-quorum' ? 'the cluster has no leader' : 'no member answered';
    }
    if (Date.now() >= deadline) {
      throw new OperationError(
        `member ${member.name} is still a learner after ${Math.round(options.timeoutMs / 1000)}s (${last}): check that its etcd runs and reaches the leader, then run promote again`,
      );
    }
    logger.info('the learner is not ready to be promoted yet; asking again', { member: member.name, reason: last });
    await backoff.wait(options.signal);
  }
}
