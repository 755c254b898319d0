import { compactionAt } from '@etcd-steward/core/backup';
import { errorMessage } from '@etcd-steward/core/common';
import { type EtcdConnection, etcdAuthToken, WatchCompactedError } from '@etcd-steward/core/etcd';

/**
 * etcd lets a watch start at the revision it compacted at, but has dropped that revision's deletes: a delta read so
 * would lack them. Such a start is as compacted as an older one (WatchCompactedError).
 */
export async function assertWatchable(connection: EtcdConnection, from: number): Promise<void> {
  const compaction = await compactionAt(connection, await etcdAuthToken(connection), from).catch((err) => {
    // A member behind the chain (a follower catching up, a new leader's) compacted nothing past its head: the
    // watch waits for it, as it always did.
    if (/future revision/.test(errorMessage(err))) return 'below';
    throw err;
  });
  if (compaction !== 'below') throw new WatchCompactedError(from, from);
}
