import { compactionAt } from '@etcd-steward/core/backup';
import { errorMessage, type Logger } from '@etcd-steward/core/common';
import { type EtcdConnection, etcdAuthToken, WatchCompactedError, watchRevisions } from '@etcd-steward/core/etcd';

/** How long a watch may take to say where etcd compacted. */
const COMPACT_REVISION_MS = 5_000;

/**
 * etcd lets a watch start at the revision it compacted at, but has dropped that revision's deletes: a delta read so
 * would lack them. Such a start is as compacted as an older one (WatchCompactedError, with the revision etcd
 * compacted at where a watch from `from` says it; `from` where it does not).
 */
export async function assertWatchable(connection: EtcdConnection, from: number): Promise<void> {
  const compaction = await compactionAt(connection, await etcdAuthToken(connection), from).catch((err) => {
    // A member behind the chain (a follower catching up, a new leader's) compacted nothing past its head: the
    // watch waits for it, as it always did.
    if (/future revision/.test(errorMessage(err))) return 'below';
    throw err;
  });
  if (compaction !== 'below') throw new WatchCompactedError(from, await compactRevision(connection, from));
}

/**
 * Whether the deltas can go on from `revision` (a watch from it reads every event etcd wrote there and after): false
 * where etcd compacted past it, said with the revisions, the deltas then going on after a full snapshot; undefined
 * where etcd could not be asked.
 */
export async function deltasGoOnFrom(
  connection: EtcdConnection,
  revision: number,
  logger: Logger,
): Promise<boolean | undefined> {
  try {
    await assertWatchable(connection, revision);
    return true;
  } catch (err) {
    if (!(err instanceof WatchCompactedError)) return undefined;
    logger.error(
      'etcd compacted its history past the revision the next delta needs; the deltas go on after the full snapshot',
      { neededRevision: err.fromRevision, compactRevision: err.compactRevision },
    );
    return false;
  }
}

/** The revision etcd compacted at, as a watch from `from` (compacted) is refused with it; `from` if it is not told. */
async function compactRevision(connection: EtcdConnection, from: number): Promise<number> {
  const signal = AbortSignal.timeout(COMPACT_REVISION_MS);
  try {
    for await (const _ of watchRevisions(connection, from, { signal })) break; // compacted at `from` itself
  } catch (err) {
    if (err instanceof WatchCompactedError) return err.compactRevision;
  }
  return from;
}
