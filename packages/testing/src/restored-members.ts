import { dirname, join } from 'node:path';
import {
  createEtcdClient,
  EtcdProcess,
  findEtcdBinaries,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
} from '@etcd-steward/core';
import type { Etcd3 } from 'etcd3';

/** A data dir a restore made for one member, and the peer port its member config names. */
export interface RestoredMember {
  name: string;
  dataDir: string;
  peerPort: number;
}

/** Each member's keyspace fingerprint (see readRestored). */
export function fingerprintRestored(
  members: RestoredMember[],
  options: { initialCluster: string; clusterToken: string; binDir?: string },
): Promise<KeyspaceFingerprint[]> {
  return readRestored(members, options, (client) => keyspaceFingerprint(client));
}

/**
 * Starts etcd on restored data dirs as one cluster (as their owners would), waits until every member is
 * healthy, reads each member with `read` and stops them all.
 */
export async function readRestored<T>(
  members: RestoredMember[],
  options: { initialCluster: string; clusterToken: string; binDir?: string },
  read: (client: Etcd3) => Promise<T>,
): Promise<T[]> {
  const binaries = await findEtcdBinaries(options.binDir);
  const started: EtcdProcess[] = [];
  try {
    for (const m of members) {
      started.push(
        await EtcdProcess.start({
          binaries,
          name: m.name,
          dataDir: m.dataDir,
          logFile: join(dirname(m.dataDir), `${m.name}-etcd.log`),
          peerPort: m.peerPort,
          initialCluster: options.initialCluster,
          clusterToken: options.clusterToken,
          throwaway: true,
        }),
      );
    }
    await Promise.all(started.map((e) => e.waitHealthy()));
    const results: T[] = [];
    for (const e of started) {
      const client = createEtcdClient({ endpoints: [e.clientUrl] });
      try {
        results.push(await read(client));
      } finally {
        client.close();
      }
    }
    return results;
  } finally {
    await Promise.all(started.map((e) => e.stop()));
  }
}
