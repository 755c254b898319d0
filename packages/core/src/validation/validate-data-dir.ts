import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { errorMessage, UsageError } from '../common/errors.js';
import { type RaftSnapshotFile, raftSnapshotNames, readRaftSnapshot } from '../wal/raft-snapshot-file.js';
import { scanWal, type WalSummary } from '../wal/wal-scan.js';
import { listWalSegments } from '../wal/wal-segments.js';
import type { LeafVisitor } from './bbolt-tree-check.js';
import { checkDb, type DbState } from './db-check.js';
import { Decided } from './decided.js';
import { checkSafeGuard } from './safe-guard.js';
import { describeServed, servedRevision } from './served-revision.js';
import { openStoreForCheck, storeFacts } from './store-facts.js';
import { type DataDirReport, type Finding, type ValidationMode, VERDICTS, type Verdict } from './verdict.js';

export interface ValidateOptions {
  dataDir: string;
  mode: ValidationMode;
  /** The pod's namespace (POD_NAMESPACE), for the safe_guard file. */
  namespace?: string;
  /** A store URL: the data must not be behind its newest snapshot. */
  store?: string;
  /** A db below this revision is invalid (ebr's failbelowrevision). */
  failBelowRevision?: number;
  /** A db this many revisions ahead of the store's newest snapshot gets a warning. */
  maxRevisionsAhead: number;
  /** Write nothing, not even a missing safe_guard (bootstrap's dry run). */
  readOnly?: boolean;
  /** Full mode: each leaf page of the db as the check reads it (see checkBboltTree). */
  onLeaf?: LeafVisitor;
}

/**
 * Is this etcd data dir safe to start etcd on (docs/etcd-formats.md §1 to docs/etcd-formats.md §6)? Checks in order — the volume, the
 * layout, the db, the WAL, the raft snapshot file, then the store — and the first problem decides the verdict. Reads, never writes,
 * the data dir; the only write is ebr's safe_guard file when it is missing.
 */
export async function validateDataDir(options: ValidateOptions): Promise<DataDirReport> {
  const { dataDir, mode } = options;
  const findings: Finding[] = [];
  const report = (verdict: Verdict, reason: string, extra: Partial<DataDirReport> = {}): DataDirReport => ({
    verdict,
    exitCode: VERDICTS[verdict].exitCode,
    reason,
    mode,
    dataDir,
    findings,
    ...extra,
  });
  const facts: Partial<DataDirReport> = {};
  // Opened first, so that a store configured wrong is bad usage before any check runs; one that cannot be
  // reached matters only if the data is otherwise sound.
  const store = options.store === undefined ? undefined : await openStoreForCheck(options.store);
  if ((await stat(dataDir).catch(() => undefined))?.isFile()) {
    throw new UsageError(`--data-dir ${dataDir} is a file; give etcd's data dir (a folder)`);
  }
  try {
    await checkVolume(options, findings);
    await checkLayout(dataDir);
    const db = dbFacts(dataDir, mode, findings, options.onLeaf);
    facts.db = {
      revision: db.revision,
      consistentIndex: db.consistentIndex,
      pageSize: db.meta.pageSize,
      pages: db.meta.pgid,
      txid: String(db.meta.txid),
      ...(db.pagesWalked === undefined ? {} : { pagesWalked: db.pagesWalked }),
    };
    const wal = await walFacts(dataDir, db.consistentIndex, findings);
    facts.wal = {
      segments: wal.segments,
      segmentsRead: wal.segmentsRead,
      records: wal.records,
      ...(wal.lastSnapshot ? { lastSnapshot: wal.lastSnapshot } : {}),
      ...(wal.hardState ? { hardState: wal.hardState } : {}),
      tornTail: wal.tornTail !== undefined,
      ...(wal.replay ? { replay: wal.replay } : {}),
    };
    const snap = await snapFacts(dataDir, db, wal, findings);
    if (snap.inUse) {
      facts.snap = { file: snap.inUse.name, index: snap.inUse.index, term: snap.inUse.term, files: snap.files };
    }
    // A db etcd swaps for a .snap.db is not what it serves: the replay counts from that db's index.
    const swapped = snap.inUse !== undefined && snap.inUse.index > db.consistentIndex;
    const served = servedRevision(db.revision, swapped ? undefined : wal.replay);
    facts.served = served;
    const revision = describeServed(db.revision, served);
    if (options.failBelowRevision !== undefined && served.atMost < options.failBelowRevision) {
      throw new Decided('restore-needed', {
        check: 'db',
        severity: 'problem',
        message: `etcd would serve ${revision}, below --fail-below-revision ${options.failBelowRevision}`,
      });
    }
    let storeNote = '';
    if (store) {
      facts.store = await storeFacts(store, revision, served, options.maxRevisionsAhead, findings, {
        dataDir,
        revision: db.revision,
      });
      if (facts.store.newestRevision !== undefined) storeNote = `, the store's newest is ${facts.store.newestRevision}`;
    }
    return report(
      'valid',
      `${dataDir} is sound (${mode} check): ${revision}, consistent index ${db.consistentIndex}${storeNote}`,
      facts,
    );
  } catch (err) {
    if (!(err instanceof Decided)) throw err;
    findings.push(err.finding);
    return report(err.verdict, err.finding.message, facts);
  }
}

async function checkVolume(options: ValidateOptions, findings: Finding[]): Promise<void> {
  const guard = await checkSafeGuard(options.dataDir, options.namespace, { readOnly: options.readOnly }).catch(
    (err) => {
      if (err instanceof UsageError) throw err;
      throw new Decided('cannot-decide', {
        check: 'safe-guard',
        severity: 'problem',
        message: `cannot read the safe_guard file beside ${options.dataDir}: ${errorMessage(err)}`,
      });
    },
  );
  if (guard.status === 'no-namespace') {
    findings.push({
      check: 'safe-guard',
      severity: 'warning',
      message: 'POD_NAMESPACE is not set: the check that this volume belongs to this cluster was skipped',
    });
  } else if (guard.status === 'mismatch') {
    throw new Decided('wrong-volume', {
      check: 'safe-guard',
      severity: 'problem',
      message: `${guard.path} names namespace "${guard.found}", not this pod's "${options.namespace}": the volume belongs to another cluster; mount this cluster's volume`,
    });
  }
}

/** `member/`, `member/snap/db` and `member/wal/` (docs/etcd-formats.md §1). No data dir, or an empty one, needs a restore too. */
async function checkLayout(dataDir: string): Promise<void> {
  const kind = async (path: string) => {
    const st = await stat(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw new Decided('cannot-decide', {
        check: 'layout',
        severity: 'problem',
        message: `cannot read ${path}: ${err.code}`,
      });
    });
    return st?.isDirectory() ? 'folder' : st ? 'file' : 'missing';
  };
  const missing = (message: string) => new Decided('restore-needed', { check: 'layout', severity: 'problem', message });
  const top = await kind(dataDir);
  const empty = async () =>
    (
      await readdir(dataDir).catch((err: NodeJS.ErrnoException) => {
        throw new Decided('cannot-decide', {
          check: 'layout',
          severity: 'problem',
          message: `cannot list ${dataDir}: ${err.code}`,
        });
      })
    ).length === 0;
  if (top === 'missing' || (await empty())) {
    throw missing(`${dataDir} holds no etcd data (${top === 'missing' ? 'it does not exist' : 'it is empty'})`);
  }
  for (const [path, want] of [
    ['member', 'folder'],
    ['member/snap/db', 'file'],
    ['member/wal', 'folder'],
  ] as const) {
    if ((await kind(join(dataDir, path))) !== want) throw missing(`${dataDir} has no ${path} ${want}`);
  }
}

function dbFacts(dataDir: string, mode: ValidationMode, findings: Finding[], onLeaf?: LeafVisitor): DbState {
  let db: DbState;
  try {
    db = checkDb(join(dataDir, 'member/snap/db'), mode, onLeaf);
  } catch (err) {
    throw new Decided(unreadable(err) ? 'cannot-decide' : 'restore-needed', {
      check: 'db',
      severity: 'problem',
      message: `member/snap/db: ${errorMessage(err)}`,
    });
  }
  for (const message of db.warnings) findings.push({ check: 'db', severity: 'warning', message });
  return db;
}

/** The whole WAL, in both modes: etcd reads every segment at start-up and stops at any damage (wal-scan.ts). */
async function walFacts(dataDir: string, consistentIndex: number, findings: Finding[]): Promise<WalSummary> {
  let wal: WalSummary;
  try {
    wal = await scanWal(join(dataDir, 'member/wal'), { replayAfter: consistentIndex });
  } catch (err) {
    throw new Decided(unreadable(err) ? 'cannot-decide' : 'restore-needed', {
      check: 'wal',
      severity: 'problem',
      message: errorMessage(err),
    });
  }
  if (wal.tornTail) {
    findings.push({
      check: 'wal',
      severity: 'warning',
      message: `the last WAL record (${wal.tornTail.segment} at byte ${wal.tornTail.offset}) is torn, as a crash leaves it: etcd drops it at start-up`,
    });
  }
  return wal;
}

/**
 * The raft snapshot etcd will start from, chosen as etcd 3.4.8+ and 3.5 choose it (`LoadNewestAvailable`,
 * docs/etcd-formats.md §4.3): the `.snap` files newest first, a damaged one set aside (etcd renames it `.broken`),
 * one that no WAL snapshot record up to the HardState's commit names skipped; the first left is the one. With
 * none, etcd reads the WAL from its start, which must still be there. The WAL must reach back to the snapshot,
 * and a db behind it needs the `member/snap/<index>.snap.db` etcd would swap in.
 */
async function snapFacts(
  dataDir: string,
  db: DbState,
  wal: WalSummary,
  findings: Finding[],
): Promise<{ inUse?: RaftSnapshotFile; files: number }> {
  const snapDir = join(dataDir, 'member/snap');
  const problem = (err: unknown) =>
    new Decided(unreadable(err) ? 'cannot-decide' : 'restore-needed', {
      check: 'snap',
      severity: 'problem',
      message: errorMessage(err),
    });
  const names = await raftSnapshotNames(snapDir).catch((err) => {
    throw problem(err);
  });
  const commit = wal.hardState?.commit ?? 0;
  const named = wal.snapshots.filter((s) => s.index <= commit);
  const warn = (message: string) => findings.push({ check: 'snap', severity: 'warning', message });
  let inUse: RaftSnapshotFile | undefined;
  for (const name of names) {
    let file: RaftSnapshotFile;
    try {
      file = readRaftSnapshot(snapDir, name);
    } catch (err) {
      if (unreadable(err)) throw problem(err);
      warn(`${errorMessage(err)}, and tries the one before`);
      continue;
    }
    if (!named.some((s) => s.index === file.index && s.term === file.term)) {
      warn(
        `member/snap/${name} (index ${file.index}, term ${file.term}) has no WAL snapshot record up to the commit index ${commit}: etcd saves the file first, so a crash came between the two; etcd skips it`,
      );
      continue;
    }
    if (file.misnamed) {
      warn(`member/snap/${name} holds the snapshot at index ${file.index}, term ${file.term}: etcd goes by that`);
    }
    inUse = file;
    break;
  }
  const newestNamed = named.at(-1);
  if (newestNamed && newestNamed.index > (inUse?.index ?? 0)) {
    warn(
      `the WAL's last snapshot record (index ${newestNamed.index}) has no .snap file that etcd can read: etcd starts from ${inUse ? `member/snap/${inUse.name} (index ${inUse.index})` : 'no snapshot'} and replays the WAL after it`,
    );
  }
  await checkWalReaches(dataDir, inUse);
  if (inUse && inUse.index > db.consistentIndex) {
    const received = join(snapDir, `${inUse.index.toString(16).padStart(16, '0')}.snap.db`);
    if (!(await stat(received).catch(() => undefined))?.isFile()) {
      throw new Decided('restore-needed', {
        check: 'snap',
        severity: 'problem',
        message: `etcd would start from the raft snapshot at index ${inUse.index}, ahead of the db's consistent index ${db.consistentIndex}, and there is no ${received.slice(dataDir.length + 1)} to replace the db with: the db is older than the WAL`,
      });
    }
  }
  return { inUse, files: names.length };
}

/**
 * etcd reads the WAL from the last segment that starts at or before the snapshot's index (from index 0 without
 * one, docs/etcd-formats.md §5.1): etcd may have removed the segments before a newer snapshot it cannot use.
 */
async function checkWalReaches(dataDir: string, inUse: RaftSnapshotFile | undefined): Promise<void> {
  const [oldest] = await listWalSegments(join(dataDir, 'member/wal'));
  const from = inUse?.index ?? 0;
  if (oldest && oldest.index > BigInt(from)) {
    throw new Decided('restore-needed', {
      check: 'snap',
      severity: 'problem',
      message: inUse
        ? `etcd would start from member/snap/${inUse.name} (index ${inUse.index}), the newest sound .snap a WAL snapshot record names, but the WAL's oldest segment ${oldest.name} starts after it: etcd cannot replay from it`
        : `there is no sound .snap file that a WAL snapshot record names, and the WAL's oldest segment ${oldest.name} does not start at index 0: etcd cannot start`,
    });
  }
}

/**
 * A file that could not be read (permissions, I/O) says nothing about the data. Anything else thrown while
 * reading it is the data's fault: the checks' own findings, and damage that broke a parse.
 */
function unreadable(err: unknown): boolean {
  return typeof (err as { syscall?: unknown }).syscall === 'string';
}
