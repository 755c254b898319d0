import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { storedRevisionDigest } from '../backup/revision-digest.js';
import { type CatalogEntry, listSnapshots } from '../backup/snapshot-catalog.js';
import { errorMessage, UsageError } from '../common/errors.js';
import { EncryptionKeyError } from '../format/encryption/envelope-format.js';
import { openStore } from '../store/location.js';
import { isTransient } from '../store/retry.js';
import type { SnapStore } from '../store/snapstore.js';
import { dbRevisionDigest } from './db-revision-digest.js';
import { Decided } from './decided.js';
import type { ServedRevision } from './served-revision.js';
import type { DataDirReport, Finding } from './verdict.js';

/** The store, or why it could not be reached: a down or unreachable server, not a wrong setting. */
export async function openStoreForCheck(url: string): Promise<SnapStore | { unreachable: unknown }> {
  try {
    // Before the sidecar's first snapshot a file:// store's folder is not there yet: that is an empty store.
    return await openStore(url, { allowMissingFolder: true });
  } catch (err) {
    const code = (err as { cause?: { code?: unknown } }).cause?.code;
    if (err instanceof UsageError && !isTransient(err) && code !== 'ECONNREFUSED' && code !== 'ENOTFOUND') throw err;
    return { unreachable: err };
  }
}

/** How many of the store's newest snapshots at or below the db's revision are tried for one that can be compared. */
const HISTORY_TRIES = 5;

/**
 * Whether the db and the store hold one history: the newest of the store's snapshots at or below the db's revision
 * against the db's rows of that revision (revisionDigest). A data dir of another cluster, or one restored to an
 * earlier revision whose store was not forked (etcd-restore --fork), holds other writes there: which one is right
 * cannot be told here, and a restore would replace the one with the other. Where nothing can be compared (etcd's
 * empty revision 1, snapshots that record no digest, rows the db compacted), nothing is concluded.
 */
async function checkSameHistory(
  store: SnapStore,
  snapshots: readonly CatalogEntry[],
  dataDir: string,
  dbRevision: number,
): Promise<void> {
  const candidates = snapshots
    .filter((e) => e.lastRevision >= 2 && e.lastRevision <= dbRevision)
    .sort((a, b) => b.lastRevision - a.lastRevision)
    .slice(0, HISTORY_TRIES);
  if (candidates.length === 0) return;
  const scratch = await mkdtemp(join(tmpdir(), 'etcd-validate-history-'));
  try {
    for (const entry of candidates) {
      const inDb = dbRevisionDigest(join(dataDir, 'member', 'snap', 'db'), entry.lastRevision);
      if (inDb === undefined) return; // compacted in the db: so is every older revision
      // An encrypted delta without the key (check needs none) tells nothing; a full snapshot's digest is plain.
      const inStore = await storedRevisionDigest(store, entry, scratch).catch((err) => {
        if (err instanceof EncryptionKeyError) return undefined;
        throw err;
      });
      if (inStore === undefined) continue;
      if (inStore === inDb) return;
      throw new Decided('cannot-decide', {
        check: 'store',
        severity: 'problem',
        message: `the data dir and the store hold different histories: at revision ${entry.lastRevision} the store's ${entry.name} holds other writes than the db. The store is another cluster's (check --store), or this data was restored to an earlier revision and the store not forked (etcd-restore --fork); nothing was changed`,
      });
    }
  } catch (err) {
    if (err instanceof Decided) throw err;
    throw new Decided('cannot-decide', {
      check: 'store',
      severity: 'problem',
      message: `the data dir is sound, but its history could not be compared with the store's: ${errorMessage(err)}`,
    });
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * The store's history against the db's (checkSameHistory), then its newest snapshot against the revision etcd will
 * serve: behind it, even at the most the WAL's replay
 * can give, is stale data; between the least and the most it cannot be told without applying the entries, and
 * the data is kept (a restore would replace writes the WAL holds); far ahead of it is worth a warning.
 */
export async function storeFacts(
  store: SnapStore | { unreachable: unknown },
  revision: string,
  served: ServedRevision,
  maxAhead: number,
  findings: Finding[],
  db: { dataDir: string; revision: number },
): Promise<NonNullable<DataDirReport['store']>> {
  let snapshots: CatalogEntry[];
  let listed: SnapStore;
  try {
    if ('unreachable' in store) throw store.unreachable;
    listed = store;
    snapshots = await listSnapshots(store);
  } catch (err) {
    throw new Decided('cannot-decide', {
      check: 'store',
      severity: 'problem',
      message: `the data dir is sound, but the store could not be listed to compare revisions: ${errorMessage(err)}`,
    });
  }
  const newest = snapshots.reduce((max, s) => Math.max(max, s.lastRevision), 0);
  if (snapshots.length === 0) return { snapshots: 0 };
  // Before the revisions are compared: another history's store is not newer or older, it is other.
  await checkSameHistory(listed, snapshots, db.dataDir, db.revision);
  if (served.atMost < newest) {
    throw new Decided('restore-needed', {
      check: 'store',
      severity: 'problem',
      message: `the data is stale: etcd would serve ${revision}, the store's newest snapshot is at ${newest}`,
    });
  }
  if (served.atLeast < newest) {
    findings.push({
      check: 'store',
      severity: 'warning',
      message: `etcd will serve ${revision}, and the store's newest snapshot (${newest}) lies within: some of the WAL's entries may create no revision; the data is kept, as a restore would replace the writes the WAL holds`,
    });
  }
  if (served.atLeast - newest > maxAhead) {
    findings.push({
      check: 'store',
      severity: 'warning',
      message: `the data (${revision}) is ${served.atLeast - newest} revisions ahead of the store's newest snapshot (${newest}): backups may have stopped, or the store belongs to another cluster`,
    });
  }
  return { newestRevision: newest, snapshots: snapshots.length };
}
