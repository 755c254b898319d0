import { constants } from 'node:fs';
import { cp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { OperationError } from '../common/errors.js';
import { freePort } from '../common/free-port.js';
import type { EtcdBinaries } from './etcd-binaries.js';
import { createEtcdClient } from './etcd-client.js';
import { briefGoProgramEnv } from './go-memory.js';
import { type KeyspaceFingerprint, keyspaceFingerprint } from './keyspace-fingerprint.js';
import { recordChildPid } from './orphan-processes.js';
import { runSnapshotRestore } from './snapshot-restore-command.js';
import { EtcdProcess } from './spawned-etcd.js';

const STOP_GRACE_MS = 30_000;
/**
 * etcd reads its whole db at start-up, more than once (3.4 builds its index twice). Under a memory limit
 * smaller than the db, every pass reads it from disk again: on a 354 MB db in a 256 MiB cgroup etcd took
 * ~28 s to become healthy instead of ~3. So the wait is long; an etcd that exits is noticed at once anyway.
 */
const START_TIMEOUT_MS = 10 * 60_000;

export interface SnapshotInspection {
  revision: number;
  keys: number;
  /** Keys at `atRevision` too, when asked. */
  keysAt?: number;
  fingerprint?: KeyspaceFingerprint;
}

interface InspectOptions {
  binaries: EtcdBinaries;
  /** Scratch space; the private copy or restore lives in `<workDir>/inspect-etcd` and is removed afterwards. */
  workDir: string;
  atRevision?: number;
  fingerprint?: boolean;
}

/**
 * Proves a member data dir is something etcd runs on, without touching it: a copy is started as a cluster of
 * its own (`--force-new-cluster`, so a member of a larger cluster needs no peers), on loopback, and its
 * revision and key count are read (and, if asked, the key count at an earlier revision and a fingerprint).
 * It must then stop cleanly.
 */
export async function inspectDataDir(options: InspectOptions & { dataDir: string }): Promise<SnapshotInspection> {
  const copy = join(options.workDir, 'inspect-etcd');
  await rm(copy, { recursive: true, force: true });
  // A reflink where the file system has them (XFS, Btrfs): no second copy of the db on disk or in the page cache.
  await cp(options.dataDir, copy, { recursive: true, mode: constants.COPYFILE_FICLONE });
  return inspectInPlace(options, copy, ['--force-new-cluster']);
}

/** The same for a snapshot file: restored into a private single-member data dir by etcd's own tool first. */
export async function inspectSnapshotFile(options: InspectOptions & { file: string }): Promise<SnapshotInspection> {
  const dataDir = join(options.workDir, 'inspect-etcd');
  const peerUrl = `http://127.0.0.1:${await freePort()}`;
  await rm(dataDir, { recursive: true, force: true });
  await runSnapshotRestore(options.binaries, options.file, dataDir, {
    name: 'inspect',
    initialCluster: `inspect=${peerUrl}`,
    initialClusterToken: 'etcd-steward-inspect',
    initialAdvertisePeerUrls: peerUrl,
  });
  return inspectInPlace(options, dataDir, []);
}

async function inspectInPlace(
  options: InspectOptions,
  dataDir: string,
  extraArgs: string[],
): Promise<SnapshotInspection> {
  const etcd = await EtcdProcess.start({
    binaries: options.binaries,
    name: 'inspect',
    dataDir,
    logFile: join(options.workDir, 'inspect-etcd.log'),
    throwaway: true,
    extraArgs,
    env: briefGoProgramEnv(),
  });
  let stopped = false;
  try {
    await recordChildPid(options.workDir, 'inspect-etcd', etcd.pid);
    await etcd.waitHealthy(START_TIMEOUT_MS);
    const now = await etcd.keyCount();
    const result: SnapshotInspection = { revision: now.revision, keys: now.keys };
    if (options.atRevision !== undefined) result.keysAt = (await etcd.keyCount(options.atRevision)).keys;
    if (options.fingerprint) {
      const client = createEtcdClient({ endpoints: [etcd.clientUrl] });
      try {
        result.fingerprint = await keyspaceFingerprint(client);
      } finally {
        client.close();
      }
    }
    // etcd ends on SIGTERM by re-raising it after a clean shutdown, so "killed by a signal" is normal; only
    // running into the grace period (then SIGKILL) or an error exit means it did not stop cleanly.
    const stopping = Date.now();
    const code = await etcd.stop(STOP_GRACE_MS);
    stopped = true;
    if ((code !== 0 && code !== null) || Date.now() - stopping >= STOP_GRACE_MS) {
      throw new OperationError(
        `etcd did not stop cleanly on the restored data (exit ${code}): ${await etcd.lastLogLine()}`,
      );
    }
    return result;
  } finally {
    if (!stopped) await etcd.kill();
    await rm(dataDir, { recursive: true, force: true });
  }
}
