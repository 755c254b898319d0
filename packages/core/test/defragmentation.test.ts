import { defragmentCluster, memberStatus, silentLogger } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';

it('defragments no member while one of them is down, and says which', async () => {
  const cluster = await startCluster({ members: 3 });
  onTestFinished(() => cluster.stop());
  const conn = { endpoints: [cluster.endpoints[0]] };
  // free pages in every db: a defragmented one would shrink
  const client = cluster.client();
  for (let i = 0; i < 500; i++) await client.put(`/k/${i}`).value(Buffer.alloc(4096, 'x'));
  await client.delete().prefix('/k/');
  const { revision } = await memberStatus(conn);
  await client.kv.compact({ revision: String(revision), physical: true });
  const sizes = await Promise.all(
    cluster.endpoints.slice(0, 2).map(async (e) => (await memberStatus({ endpoints: [e] })).dbSize),
  );
  await cluster.members[2].stop();

  await expect(
    defragmentCluster(conn, { minReclaimBytes: 0, timeoutMs: 10_000, logger: silentLogger }),
  ).rejects.toThrow(/member m2 is unhealthy .*: defragmentation waits for a healthy cluster/);
  // nothing was touched
  for (const [i, e] of cluster.endpoints.slice(0, 2).entries()) {
    expect((await memberStatus({ endpoints: [e] })).dbSize).toBe(sizes[i]);
  }
});
