import { join } from 'node:path';
import { dbFileRevision } from '../bbolt/db-file-revision.js';
import { OperationError } from '../common/errors.js';
import type { EtcdBinaries } from '../etcd/etcd-binaries.js';
import type { KeyspaceFingerprint } from '../etcd/keyspace-fingerprint.js';
import { inspectDataDir } from '../etcd/snapshot-inspection.js';
import type { ChainReplayResult } from '../replay/replay-chain.js';
import { KeyspaceReader } from '../validation/db-keyspace.js';
import { validateDataDir } from '../validation/validate-data-dir.js';

/**
 * How a restore proves its result before swapping it in. `check`: etcd-validate's full check of the data dir
 * (layout, bbolt meta pages and page tree, WAL) and the keyspace read from the db file, with no etcd and
 * memory that does not grow with the db. `etcd`: etcd started on a copy (it maps the whole db), the reference.
 */
export type VerifyMethod = 'check' | 'etcd';

export const VERIFY_METHODS: readonly VerifyMethod[] = ['check', 'etcd'];

export interface VerifiedResult {
  revision: number;
  keys: number;
  /** The keyspace's fingerprint, as etcd would serve it (`check` reads it from the db file; `etcd` does not ask). */
  fingerprint?: KeyspaceFingerprint;
}

/** What a verification found in the data dir. */
interface Found {
  /** Who says so, for the error message. */
  source: string;
  revision: number;
  keys: number;
  /** Live keys at the full snapshot's revision. */
  keysAtBase: number;
  fingerprint?: KeyspaceFingerprint;
}

/**
 * The member data dir `dataDir` holds what the replay produced: its revision, and as many live keys as the
 * full snapshot held at its revision plus those the deltas created minus those they deleted. Throws an
 * OperationError naming what differs.
 */
export async function verifyResult(
  method: VerifyMethod,
  dataDir: string,
  replayed: ChainReplayResult,
  ctx: { binaries: EtcdBinaries; workDir: string },
): Promise<VerifiedResult> {
  const found =
    method === 'check' ? await checkWithoutEtcd(dataDir, replayed, ctx) : await checkWithEtcd(dataDir, replayed, ctx);
  const expectedKeys = found.keysAtBase + replayed.created - replayed.deleted;
  if (found.revision !== replayed.revision || found.keys !== expectedKeys) {
    throw new OperationError(
      `the restored data failed verification: ${found.source} revision ${found.revision} with ${found.keys} keys, expected revision ${replayed.revision} with ${expectedKeys}; the target was left as it was`,
    );
  }
  return {
    revision: found.revision,
    keys: found.keys,
    ...(found.fingerprint ? { fingerprint: found.fingerprint } : {}),
  };
}

async function checkWithoutEtcd(
  dataDir: string,
  replayed: ChainReplayResult,
  ctx: { workDir: string },
): Promise<Found> {
  // The keyspace's rows are taken from the leaves the full check reads: one read of the db for both.
  const rows = new KeyspaceReader({ tmpDir: ctx.workDir, earlierRevision: replayed.baseRevision });
  try {
    const report = await validateDataDir({
      dataDir,
      mode: 'full',
      maxRevisionsAhead: Number.POSITIVE_INFINITY,
      onLeaf: (bucket, id, page) => rows.addLeaf(bucket, id, page),
    });
    if (report.verdict !== 'valid') {
      throw new OperationError(
        `the restored data failed verification: ${report.reason}; the target was left as it was`,
      );
    }
    const keyspace = rows.finish(join(dataDir, 'member', 'snap', 'db'));
    return {
      source: 'the db file holds',
      revision: keyspace.fingerprint.revision,
      keys: keyspace.fingerprint.keys,
      keysAtBase: keyspace.keysAtEarlier ?? 0,
      fingerprint: keyspace.fingerprint,
    };
  } finally {
    rows.close();
  }
}

async function checkWithEtcd(
  dataDir: string,
  replayed: ChainReplayResult,
  ctx: { binaries: EtcdBinaries; workDir: string },
): Promise<Found> {
  const onDisk = await dbFileRevision(join(dataDir, 'member', 'snap', 'db'));
  const inspection = await inspectDataDir({
    binaries: ctx.binaries,
    dataDir,
    workDir: ctx.workDir,
    atRevision: replayed.baseRevision,
  });
  if (onDisk !== inspection.revision) {
    throw new OperationError(
      `the restored data failed verification: etcd reports revision ${inspection.revision}, its db file says ${onDisk}; the target was left as it was`,
    );
  }
  return {
    source: 'etcd reports',
    revision: inspection.revision,
    keys: inspection.keys,
    keysAtBase: inspection.keysAt ?? 0,
  };
}
