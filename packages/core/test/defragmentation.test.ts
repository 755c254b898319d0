import { defragmentCluster, memberStatus, silentLogger } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';

/** Most of the 2 MB the test writes and deletes, free in every db once compacted. */
const FREED = 1_500_000;

it('defragments no member while one of them is down, and says which', async () => {
  const cluster = await startCluster({ members: 3 });
  onTestFinished(() => cluster.stop());
  const conn = { endpoints: [cluster.endpoints[0]] };
  // free pages in every db: defragmentation would give them back
  const client = cluster.client();
  for (let i = 0; i < 500; i++) await client.put(`/k/${i}`).value(Buffer.alloc(4096, 'x'));
  await client.delete().prefix('/k/');
  const { revision } = await memberStatus(conn);
  await client.kv.compact({ revision: String(revision), physical: true });
  // Each member applies the compaction in its own time, and etcd 3.5 counts the freed pages as free
  // only at a later commit: write until every member reports them.
  const freeBytes = async (endpoint: string) => {
    const status = await memberStatus({ endpoints: [endpoint] });
    return status.dbSize - status.dbSizeInUse;
  };
  for (const e of cluster.endpoints) {
    for (let tries = 0; (await freeBytes(e)) < FREED; tries++) {
      if (tries === 100) throw new Error(`member ${e} did not report the freed pages in 10 s`);
      await client.put('/tick').value(String(tries));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  await cluster.members[2].stop();

  await expect(
    defragmentCluster(conn, { minReclaimBytes: 0, timeoutMs: 10_000, logger: silentLogger }),
  ).rejects.toThrow(/member m2 is unhealthy .*: defragmentation waits for a healthy cluster/);
  // nothing was touched: every db keeps its free pages
  for (const e of cluster.endpoints.slice(0, 2)) expect(await freeBytes(e)).toBeGreaterThanOrEqual(FREED);
});
