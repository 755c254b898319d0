import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEtcdClient, EtcdProcess, findEtcdBinaries, freePort } from '@etcd-steward/core';
import type { Etcd3 } from 'etcd3';
import { checkEtcdUnderTest } from './etcd-versions.js';

/** A real etcd cluster of 1 or 3 members on loopback, in a temp dir, for tests and the demo. */
export interface TestCluster {
  dir: string;
  members: EtcdProcess[];
  endpoints: string[];
  client(): Etcd3;
  stop(): Promise<void>;
}

export async function startCluster(
  options: {
    members?: 1 | 3;
    binDir?: string;
    /** More etcd flags for every member (a later flag wins over the defaults, e.g. --quota-backend-bytes). */
    etcdArgs?: string[];
  } = {},
): Promise<TestCluster> {
  const count = options.members ?? 1;
  const binaries = await findEtcdBinaries(options.binDir);
  if (!options.binDir) checkEtcdUnderTest(binaries);
  const dir = await mkdtemp(join(tmpdir(), 'etcd-steward-cluster-'));
  const specs = [];
  for (let i = 0; i < count; i++) {
    specs.push({ name: `m${i}`, clientPort: await freePort(), peerPort: await freePort() });
  }
  const initialCluster = specs.map((s) => `${s.name}=http://127.0.0.1:${s.peerPort}`).join(',');
  // One token for all members: members started with different tokens form different clusters.
  const clusterToken = `test-${Date.now()}-${process.pid}`;
  const members: EtcdProcess[] = [];
  const clients: Etcd3[] = [];
  const stop = async () => {
    for (const c of clients) c.close();
    await Promise.all(members.map((m) => m.stop()));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (const spec of specs) {
      members.push(
        await EtcdProcess.start({
          binaries,
          ...spec,
          dataDir: join(dir, spec.name),
          logFile: join(dir, `${spec.name}.log`),
          initialCluster,
          clusterToken,
          throwaway: true,
          extraArgs: options.etcdArgs,
        }),
      );
    }
    await Promise.all(members.map((m) => m.waitHealthy()));
  } catch (err) {
    await stop();
    throw err;
  }
  const endpoints = members.map((m) => m.clientUrl);
  return {
    dir,
    members,
    endpoints,
    client() {
      const c = createEtcdClient({ endpoints });
      clients.push(c);
      return c;
    },
    stop,
  };
}
