import { setTimeout as sleep } from 'node:timers/promises';
import {
  createEtcdClient,
  type Etcd3,
  type EtcdMemberOptions,
  EtcdProcess,
  findEtcdBinaries,
  freePort,
} from '@etcd-steward/core';

/**
 * The cluster of a fault run (docs/proof.md §5) and what the run does to it beyond killing: members restartable on
 * their data dirs (all of them stopped and started again around a restore), the lead handed to a chosen member,
 * etcd's quota filled until it raises NOSPACE.
 */
/** The members of the run's cluster, each restartable on its data dir, or on one a restore or a rejoin made. */
export async function startFaultCluster(
  count: 1 | 3,
  seed: number,
  at: (...names: string[]) => string,
  extraArgs: string[],
) {
  const binaries = await findEtcdBinaries();
  const specs: Array<{ name: string; clientPort: number; peerPort: number }> = [];
  for (let i = 0; i < count; i++)
    specs.push({ name: `f${i}`, clientPort: await freePort(), peerPort: await freePort() });
  const initialCluster = specs.map((s) => `${s.name}=http://127.0.0.1:${s.peerPort}`).join(',');
  const clusterToken = `fault-run-${seed}`;
  const options: EtcdMemberOptions[] = specs.map((s) => ({
    binaries,
    ...s,
    dataDir: at(`etcd-${s.name}`),
    logFile: at(`etcd-${s.name}.log`),
    initialCluster,
    clusterToken,
    throwaway: true,
    extraArgs,
  }));
  const members: EtcdProcess[] = [];
  try {
    for (const o of options) members.push(await EtcdProcess.start(o));
    await Promise.all(members.map((m) => m.waitHealthy()));
  } catch (err) {
    await Promise.all(members.map((m) => m.stop()));
    throw err;
  }
  const start = async (i: number, timeoutMs = 30_000) => {
    members[i] = await EtcdProcess.start(options[i]);
    await members[i].waitHealthy(timeoutMs);
  };
  return {
    count,
    endpoints: members.map((m) => m.clientUrl),
    initialCluster,
    clusterToken,
    /** What etcd-restore and etcd-validate need to lay out member i's data dir. */
    member: (i: number) => ({
      name: options[i].name,
      dataDir: options[i].dataDir,
      peerUrl: `http://127.0.0.1:${specs[i].peerPort}`,
      clientUrl: members[i].clientUrl,
    }),
    async restart(i: number, downMs: number) {
      await members[i].kill();
      await sleep(downMs);
      await start(i);
    },
    kill: (i: number) => members[i].kill(),
    /**
     * Starts member i again; after a rejoin with the `--initial-cluster` and state etcd-validate printed (and kept
     * for its later restarts: etcd ignores both once its data dir holds data).
     */
    async start(i: number, rejoined?: { initialCluster: string; clusterState: 'new' | 'existing' }) {
      if (rejoined) options[i] = { ...options[i], ...rejoined };
      await start(i, 60_000);
    },
    /** Every member stopped (SIGTERM), as before a restore. */
    stopAll: () => Promise.all(members.map((m) => m.stop())),
    /** Every member started on its data dir, together (a restored cluster forms its quorum anew). */
    async startAll() {
      for (let i = 0; i < count; i++) members[i] = await EtcdProcess.start(options[i]);
      await Promise.all(members.map((m) => m.waitHealthy(60_000)));
    },
    stop: () => Promise.all(members.map((m) => m.stop())),
  };
}

export type FaultCluster = Awaited<ReturnType<typeof startFaultCluster>>;

async function withClient<T>(endpoints: string[], call: (client: Etcd3) => Promise<T>): Promise<T> {
  const client = createEtcdClient({ endpoints });
  try {
    return await call(client);
  } finally {
    client.close();
  }
}

/** Hands the lead to member `to` (or, when it leads already or is down, to another member); says what it did. */
export async function moveLeader(endpoints: string[], to: number): Promise<string> {
  const status = await Promise.all(
    endpoints.map((e) => withClient([e], (c) => c.maintenance.status()).catch(() => undefined)),
  );
  const leaderId = status.find((s) => s)?.leader;
  const leader = status.findIndex((s) => s?.header.member_id === leaderId);
  if (leader < 0) return 'no leader known';
  const target = [to, ...endpoints.keys()].find((i) => i !== leader && status[i]);
  if (target === undefined) return 'no member to move to';
  await withClient([endpoints[leader]], (c) =>
    c.maintenance.moveLeader({ targetID: status[target]?.header.member_id }),
  );
  return `moved from member ${leader} to ${target}`;
}

/** etcd's quota in a run with NOSPACE: small, for a burst to fill in seconds; the writer's own data stays far below. */
export const NOSPACE_QUOTA = 8 * 2 ** 20;

/**
 * Eight keys of 128 KiB overwritten until etcd refuses them (NOSPACE): the history fills the quota, the live data
 * is 1 MiB. Its own client: etcd3 pauses a client that was refused several times in a row.
 */
export async function fillQuota(endpoints: string[]): Promise<string> {
  return withClient(endpoints, async (client) => {
    const value = Buffer.alloc(128 * 1024, 'q');
    for (let n = 0; n < 400; n++) {
      try {
        await client.put(`/f/quota/${n % 8}`).value(Buffer.concat([Buffer.from(`${n}:`), value]));
      } catch (err) {
        if (/database space exceeded/.test(String(err))) return `NOSPACE after ${n} big puts`;
        await sleep(100);
      }
    }
    return 'etcd took 400 big puts without NOSPACE';
  });
}
