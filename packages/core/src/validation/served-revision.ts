import type { WalReplay } from '../wal/wal-scan.js';

/** The revision etcd will serve once it has started on a data dir: the db's, plus what it replays from its WAL. */
export interface ServedRevision {
  atLeast: number;
  atMost: number;
}

/**
 * etcd applies at start-up the WAL's entries past the db's consistent index (docs/etcd-formats.md §6.1): after a
 * crash the db is behind the WAL by what its last batch had not yet committed. Each entry creates at most one
 * revision, and some create one for certain (entry-revisions.ts); the entries not yet committed are counted in
 * the most only (a lone member commits its whole log once it leads). Without a replay (a db etcd swaps for a
 * `.snap.db`, whose revision is unknown) it is the db's.
 */
export function servedRevision(dbRevision: number, replay: WalReplay | undefined): ServedRevision {
  return {
    atLeast: dbRevision + (replay?.revisionsAtLeast ?? 0),
    atMost: dbRevision + (replay?.revisionsAtMost ?? 0),
  };
}

/** "revision 362 (355 in the db, 7 from the WAL)", or "revision 355 to 362 (…)", or "revision 355". */
export function describeServed(dbRevision: number, served: ServedRevision): string {
  if (served.atMost === dbRevision) return `revision ${dbRevision}`;
  const range = served.atLeast === served.atMost ? `${served.atMost}` : `${served.atLeast} to ${served.atMost}`;
  const fromWal =
    served.atLeast === served.atMost
      ? `${served.atMost - dbRevision}`
      : `${served.atLeast - dbRevision} to ${served.atMost - dbRevision}`;
  return `revision ${range} (${dbRevision} in the db, ${fromWal} from replaying the WAL)`;
}
