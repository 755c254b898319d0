import { mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  createEtcdClient,
  EtcdProcess,
  findEtcdBinaries,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  LocalStore,
  takeFullSnapshot,
} from '@etcd-steward/core';
import type { Etcd3 } from 'etcd3';
import { checkEtcdUnderTest } from './etcd-versions.js';

/**
 * Runs a one-member etcd on `dataDir` for the length of `work`, then stops it cleanly and leaves the data dir
 * behind: what a stopped member leaves, for checks of data dirs. Run it again on the same dir to add to it.
 * `extraArgs` go to etcd, e.g. a small `--snapshot-count` for raft snapshots in a small data dir.
 */
export async function withMember<T>(
  dataDir: string,
  work: (client: Etcd3, endpoint: string) => Promise<T>,
  extraArgs: string[] = [],
): Promise<T> {
  return runMember(dataDir, work, extraArgs, 'stop');
}

/**
 * withMember, but etcd is killed (SIGKILL) as soon as `work` returns: what a crash or an OOM kill leaves. With a
 * long `--backend-batch-interval`, the db then lacks the last writes, which only the WAL holds.
 */
export async function withCrashedMember<T>(
  dataDir: string,
  work: (client: Etcd3, endpoint: string) => Promise<T>,
  extraArgs: string[] = [],
): Promise<T> {
  return runMember(dataDir, work, extraArgs, 'kill');
}

async function runMember<T>(
  dataDir: string,
  work: (client: Etcd3, endpoint: string) => Promise<T>,
  extraArgs: string[],
  end: 'stop' | 'kill',
): Promise<T> {
  await mkdir(dirname(dataDir), { recursive: true });
  const binaries = await findEtcdBinaries();
  checkEtcdUnderTest(binaries);
  const member = await EtcdProcess.start({
    binaries,
    name: 'm0',
    dataDir,
    logFile: join(dirname(dataDir), 'etcd.log'),
    extraArgs,
  });
  let client: Etcd3 | undefined;
  try {
    await member.waitHealthy();
    client = createEtcdClient({ endpoints: [member.clientUrl] });
    return await work(client, member.clientUrl);
  } finally {
    if (end === 'kill') await member.kill();
    client?.close();
    await member.stop();
  }
}

/**
 * withMember, then a full snapshot (uncompressed) of what `work` wrote, into a local store at `storeDir`: a data
 * dir and its backup, for checks that hold one against the other. Returns the keyspace the snapshot holds.
 */
export async function withBackedUpMember(
  dataDir: string,
  storeDir: string,
  work: (client: Etcd3) => Promise<unknown>,
  extraArgs: string[] = [],
): Promise<KeyspaceFingerprint> {
  return withMember(
    dataDir,
    async (client, endpoint) => {
      await work(client);
      await takeFullSnapshot({
        connection: { endpoints: [endpoint] },
        store: new LocalStore(storeDir),
        compression: 'none',
        tempDir: dirname(storeDir),
      });
      return keyspaceFingerprint(client);
    },
    extraArgs,
  );
}
