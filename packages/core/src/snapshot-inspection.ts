import { cp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { OperationError } from './errors.js';
import type { EtcdBinaries } from './etcd-binaries.js';
import { createEtcdClient } from './etcd-client.js';
import { freePort } from './free-port.js';
import { type KeyspaceFingerprint, keyspaceFingerprint } from './keyspace-fingerprint.js';
import { recordChildPid } from './orphan-processes.js';
import { runSnapshotRestore } from './snapshot-restore-command.js';
import { EtcdProcess } from './spawned-etcd.js';

const STOP_GRACE_MS = 30_000;

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
  await cp(options.dataDir, copy, { recursive: true });
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
  });
  let stopped = false;
  try {
    await recordChildPid(options.workDir, 'inspect-etcd', etcd.pid);
    await etcd.waitHealthy();
    const client = createEtcdClient({ endpoints: [etcd.clientUrl] });
    let result: SnapshotInspection;
    try {
      const countAt = async (revision?: number) => {
        const res = await client.kv.range({
          key: Buffer.from([0]),
          range_end: Buffer.from([0]),
          count_only: true,
          revision,
        });
        return { keys: Number(res.count), revision: Number(res.header.revision) };
      };
      const now = await countAt();
      result = { revision: now.revision, keys: now.keys };
      if (options.atRevision !== undefined) result.keysAt = (await countAt(options.atRevision)).keys;
      if (options.fingerprint) result.fingerprint = await keyspaceFingerprint(client);
    } finally {
      client.close();
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
