import { chmodSync, closeSync, ftruncateSync, openSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { commitBuckets, rowsWith, writeBucket } from '../bbolt/bbolt-commit.js';
import { BboltReader, detachedCopy } from '../bbolt/bbolt-file.js';
import { PageAppender } from '../bbolt/bbolt-page-writer.js';
import { writeEmptyDb } from '../bbolt/empty-db.js';
import { OperationError } from '../common/errors.js';
import { fsyncPath } from '../common/fsync-path.js';
import type { EtcdBinaries } from './etcd-binaries.js';
import { type MemberConfig, refuseDowngrade, runSnapshotRestore } from './snapshot-restore-command.js';

/**
 * Buckets etcd's restore tool writes whole: etcdutl (3.5+) deletes the old members and writes the new ones;
 * etcdctl 3.4 leaves both as they were (docs/etcd-formats.md §4.2).
 */
const MEMBERSHIP_BUCKETS = new Set(['members', 'members_removed']);

interface Row {
  key: Buffer;
  value: Buffer;
}

/**
 * Makes the member data dir etcd's restore tool makes from `dbFile`, without the tool ever reading that db
 * (docs/etcd-formats.md §4.2). What the tool writes does not depend on the key space: the WAL and the raft
 * snapshot (membership, commit index), the `members` and `members_removed` rows, and `consistent_index` (and
 * `term`, 3.5+) in `meta`. So the tool lays out a data dir for a new, empty db, and what it wrote into that db
 * is carried into `dbFile` in one copy-on-write commit; `dbFile` (a snapshot file or a bare db) then takes the
 * empty db's place. etcd's tool would map the whole db, and 3.4's would index every key of it.
 */
export async function layOutMemberDataDir(
  binaries: EtcdBinaries,
  dbFile: string,
  dataDir: string,
  member: MemberConfig,
  options: { signal?: AbortSignal } = {},
): Promise<void> {
  refuseDowngrade(binaries, dbFile);
  await layOutAroundEmptyDb(binaries, dataDir, member, options);
  await fsyncPath(await moveDbIntoLayout(binaries, dbFile, dataDir));
}

/**
 * layOutMemberDataDir's first step, which needs no db: etcd's tool lays the data dir out around a new, empty db.
 * So it can run while the db is still being made (a restore runs it beside the replay).
 */
export async function layOutAroundEmptyDb(
  binaries: EtcdBinaries,
  dataDir: string,
  member: MemberConfig,
  options: { signal?: AbortSignal } = {},
): Promise<void> {
  const empty = `${dataDir}.empty.db`;
  await rm(empty, { force: true });
  // etcdutl writes the consistent index into `meta` without creating it.
  writeEmptyDb(empty, ['meta']);
  try {
    await runSnapshotRestore(binaries, empty, dataDir, member, { signal: options.signal, skipHashCheck: true });
  } finally {
    await rm(empty, { force: true });
  }
}

/**
 * layOutMemberDataDir's second step: the rows etcd's tool wrote carried into `dbFile` (refused when `dbFile` shows a
 * newer etcd than the tool's), which then takes the empty db's place in `dataDir`. Returns the db's path there. The
 * db file is not synced (the caller syncs it before the data dir is used: fsyncPath), its folder is.
 */
export async function moveDbIntoLayout(binaries: EtcdBinaries, dbFile: string, dataDir: string): Promise<string> {
  refuseDowngrade(binaries, dbFile);
  const laidOut = join(dataDir, 'member', 'snap', 'db');
  carryToolRows(laidOut, dbFile, binaries.etcdutl ?? binaries.etcdctl ?? 'etcd');
  // Removed first, not renamed over: ext4 writes a file renamed over another out at once (auto_da_alloc), which
  // would make this rename wait for the whole db to reach the disk (measured: restore-phases.ts).
  await rm(laidOut);
  await rename(dbFile, laidOut);
  await fsyncPath(dirname(laidOut));
  return laidOut;
}

/** The rows etcd's tool wrote into the empty db `from`, written into `into` and committed there (not synced). */
function carryToolRows(from: string, into: string, tool: string): void {
  const written = bucketRows(from);
  const fd = openSync(into, 'r+');
  try {
    const reader = new BboltReader(fd);
    const buckets = reader.buckets();
    const pages = new PageAppender(fd, reader.meta.pageSize, reader.meta.pgid);
    for (const [name, rows] of written) {
      const sequence = buckets.get(name)?.sequence ?? 0n;
      if (name === 'meta') {
        const meta = buckets.get('meta');
        buckets.set(name, writeBucket(pages, rowsWith(meta ? reader.elements(meta) : [], rows), sequence));
      } else if (MEMBERSHIP_BUCKETS.has(name)) {
        buckets.set(name, writeBucket(pages, rows, sequence));
      } else if (rows.length > 0) {
        // An etcd whose tool writes more than the versions tested here: its result would differ from the tool's.
        throw new OperationError(
          `${tool} snapshot restore wrote rows into the "${name}" bucket, which this restore does not know to carry over; use etcd 3.4 or 3.5 tools (--etcd-bin-dir)`,
        );
      }
    }
    // The commit starts where the db's pages end: etcd's sha256 trailer, if any, goes.
    ftruncateSync(fd, commitBuckets(fd, pages, reader.meta, buckets));
  } finally {
    closeSync(fd);
  }
  chmodSync(into, 0o600);
}

/** Every bucket of a (small) db with its rows. */
function bucketRows(file: string): Map<string, Row[]> {
  const fd = openSync(file, 'r');
  try {
    const reader = new BboltReader(fd);
    const out = new Map<string, Row[]>();
    for (const [name, bucket] of reader.buckets()) out.set(name, [...reader.elements(bucket)].map(copied));
    return out;
  } finally {
    closeSync(fd);
  }
}

function copied(row: Row): Row {
  return { key: detachedCopy(row.key), value: detachedCopy(row.value) };
}
