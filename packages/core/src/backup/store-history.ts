import { setTimeout as sleep } from 'node:timers/promises';
import { OperationError } from '../common/errors.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { memberStatus } from '../etcd/etcd-status.js';
import type { SnapStore } from '../store/snapstore.js';
import { compareStoredRevision, deltaAgreesThrough, deltaStateEvidence } from './revision-digest.js';
import type { CatalogEntry } from './snapshot-catalog.js';

/**
 * Whether the live cluster goes on with the history a store holds:
 * - `continues`: etcd holds the store's newest snapshot's last revision as the store holds it (or the store is empty);
 * - `forked`: etcd holds the store's history up to `commonRevision` (the last revision of a snapshot both agree on)
 *   and another one after it: a restore to an earlier revision. `abandoned`: the snapshots past it, newest last;
 * - `foreign`: etcd holds none of the revisions the store's snapshots end with as the store holds them: another
 *   cluster, or a new one;
 * - `unknown`: it cannot be told (etcd compacted the revisions to compare, or no snapshot records one) and no
 *   snapshot was found to differ.
 */
export type HistoryVerdict =
  | { kind: 'continues'; checkedRevision?: number }
  | {
      kind: 'forked';
      commonRevision: number;
      abandoned: CatalogEntry[];
      etcdRevision: number;
    }
  | { kind: 'foreign'; etcdRevision: number; storeRevision: number; different: string[] }
  | { kind: 'unknown'; reason: string };

export interface HistoryCheckOptions {
  store: SnapStore;
  /** The store's snapshots, oldest first (listSnapshots). */
  entries: readonly CatalogEntry[];
  /** The member whose history is compared. */
  connection: EtcdConnection;
  /** For reading deltas (their last revision's events). */
  scratchDir: string;
  /**
   * Snapshots (by name) an earlier check proved to differ from this etcd's history: they differ still, though etcd
   * may since have compacted what proved it (the sidecar's refusal holds, rather than turn into "cannot tell").
   */
  provenDifferent?: ReadonlySet<string>;
  /** How long a member behind the store's head may take to catch up before it counts as another history. */
  catchUpMs?: number;
  signal?: AbortSignal;
}

/** Snapshots that cannot be compared, walked past below one proven to differ before the check gives up. */
const MAX_UNTOLD = 20;

/** How one snapshot's last revision compares with etcd's: `skip` records nothing, `compacted` etcd no longer has it. */
export type RevisionMatch = 'same' | 'different' | 'skip' | 'compacted';

/**
 * How a snapshot's last revision compares with what etcd (at `etcdRevision`) holds there. `store` may be any
 * SnapStore that holds it: the store, or the sidecar's spool.
 */
export async function compareWithEtcd(
  store: SnapStore,
  entry: CatalogEntry,
  connection: EtcdConnection,
  etcdRevision: number,
  scratchDir: string,
  signal?: AbortSignal,
): Promise<RevisionMatch> {
  if (entry.lastRevision > etcdRevision) return 'different';
  if (entry.lastRevision <= 1) return 'skip';
  return compareStoredRevision(store, entry, connection, scratchDir, { signal });
}

/**
 * Compares the store's history with etcd's at the last revisions of its snapshots, newest first, until one
 * agrees: histories share a prefix up to a fork and differ from there on, so the newest snapshot that agrees
 * proves every older one. The common case costs one comparison; snapshots past etcd's revision differ without
 * one. Where the oldest snapshot that differs is a delta, the fork may lie inside it: its events are compared
 * with etcd's revision by revision. Snapshots that record nothing to compare (ebr's full snapshots, and etcd's
 * empty revision 1, which every history shares) are passed over, and so are those etcd compacted past where its
 * state tells nothing of them (up to MAX_UNTOLD in a row): the walk goes on to one that can be told, and the deltas
 * passed over below any that differs are then compared with etcd's present state revision by revision
 * (deltaStateEvidence), for an agreement proves nothing above it. Nothing told at all is `unknown`; once one
 * differs, everything after the newest proven the same is abandoned, and a difference proven with no agreement
 * found is another history (`foreign`, refused), never `unknown`.
 */
export async function checkStoreHistory(options: HistoryCheckOptions): Promise<HistoryVerdict> {
  const { store, connection, scratchDir, signal } = options;
  const entries = [...options.entries].sort((a, b) => a.lastRevision - b.lastRevision);
  if (entries.length === 0) return { kind: 'continues' };
  const storeRevision = entries[entries.length - 1].lastRevision;
  const etcdRevision = await etcdRevisionAtLeast(connection, storeRevision, options.catchUpMs ?? 5_000, signal);

  const compare = async (entry: CatalogEntry): Promise<RevisionMatch> =>
    options.provenDifferent?.has(entry.name)
      ? 'different'
      : compareWithEtcd(store, entry, connection, etcdRevision, scratchDir, signal);
  const different: string[] = [];

  /** The oldest snapshot found to differ so far. */
  let oldestDifferent: CatalogEntry | undefined;
  /** The newest revision proven the same. */
  let agreed: number | undefined;
  /** Snapshots passed over that could not be compared, since the last one that could. */
  let untold = 0;
  /** Deltas passed over that could not be compared at their last revision, newest first. */
  const passedOver: CatalogEntry[] = [];
  for (const entry of entries.toReversed()) {
    const match = await compare(entry);
    if (match === 'same') {
      agreed = entry.lastRevision;
      break;
    }
    if (match === 'different') {
      oldestDifferent = entry;
      different.push(entry.name);
      untold = 0;
      // Those that cannot be compared belong to no history yet: the walk goes on to one that can (a delta's
      // revision still tells by etcd's state past its compaction), whether or not one differed before.
    } else if (match === 'compacted') {
      if (entry.kind === 'Incr') passedOver.push(entry);
      if (++untold > MAX_UNTOLD) break;
    }
  }
  // The snapshot that agrees proves the older ones, not the deltas above it that could not be told at their last
  // revision: their revisions are compared with etcd's present state, oldest first, up to one that differs.
  for (const delta of passedOver.toReversed()) {
    if (oldestDifferent && delta.lastRevision > oldestDifferent.lastRevision) break;
    const told = await deltaStateEvidence(store, delta, connection, scratchDir, { signal });
    if (told.sameThrough !== undefined) agreed = Math.max(agreed ?? 0, told.sameThrough);
    if (told.differentAt !== undefined) {
      oldestDifferent = delta;
      different.push(delta.name);
      break;
    }
  }
  if (!oldestDifferent) {
    if (agreed !== undefined) return { kind: 'continues', checkedRevision: agreed };
    return { kind: 'unknown', reason: 'no snapshot of the store records a revision etcd still holds' };
  }
  if (oldestDifferent.kind === 'Incr' && oldestDifferent.startRevision <= etcdRevision) {
    const within = await deltaAgreesThrough(store, oldestDifferent, connection, etcdRevision, scratchDir, { signal });
    // Its first revision differing proves the fork no later than that, not at it: only with the snapshot right
    // before it proven the same is the revision before it shared.
    const proven =
      within !== undefined && (within >= oldestDifferent.startRevision || (untold === 0 && agreed !== undefined));
    if (proven) agreed = Math.max(agreed ?? 0, within);
  }
  // etcd's empty revision 1 is no history shared.
  if (agreed !== undefined && agreed >= 2) {
    const commonRevision = agreed;
    const abandoned = entries.filter((e) => e.lastRevision > commonRevision);
    // A snapshot at the store's head that agrees outweighs one beside it that does not: nothing lies past the fork.
    if (abandoned.length === 0) return { kind: 'continues', checkedRevision: commonRevision };
    return { kind: 'forked', commonRevision, abandoned, etcdRevision };
  }
  // A snapshot proven to differ, and none proven the same: another history, as far as can be told.
  return { kind: 'foreign', etcdRevision, storeRevision, different };
}

/**
 * etcd's current revision, waiting up to `catchUpMs` for a member behind `storeRevision` to catch up (a follower
 * lags its leader for a moment; a restored or new member never catches up).
 */
export async function etcdRevisionAtLeast(
  connection: EtcdConnection,
  storeRevision: number,
  catchUpMs: number,
  signal?: AbortSignal,
): Promise<number> {
  const deadline = Date.now() + catchUpMs;
  for (;;) {
    const { revision } = await memberStatus(connection, { timeoutMs: 10_000 });
    if (revision >= storeRevision || Date.now() >= deadline) return revision;
    await sleep(200, undefined, { signal });
  }
}

/** The store holds a history etcd does not continue: nothing may be written to it. */
export class ForeignHistoryError extends OperationError {
  /** The snapshots proven to differ from etcd's history. */
  readonly different: readonly string[];

  constructor(location: string, verdict: { etcdRevision: number; storeRevision: number; different?: string[] }) {
    super(
      `${location} holds another history than etcd's (etcd at revision ${verdict.etcdRevision} holds none of the revisions the store's snapshots end with, up to ${verdict.storeRevision}): another cluster's store, or one from before this cluster was created. Nothing is written to it. Point --store at a prefix of this cluster's own, or move the old snapshots out of it (etcd-copy-backups to another store, then delete them); if this cluster was restored from this store to an earlier revision without --fork and etcd has compacted since (or etcd-gc deleted the snapshots up to that revision), move the snapshots past that revision to forks/<revision>-<seconds>/ (etcd-restore --fork --dry-run lists them)`,
    );
    this.different = verdict.different ?? [];
  }
}
