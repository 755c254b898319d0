import { LocalStore, listSnapshots } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import {
  chainProblems,
  expectRestored,
  firstDelta,
  keyspaceOnceStored,
  metric,
  startSidecar,
  startWriter,
  waitFor,
} from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-gc-');

it("the sidecar's garbage collector deletes what the policy drops while deltas go on, and the newest chain restores", async () => {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const client = cluster.client();
  const storeDir = at('store');
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: `file://${storeDir}`,
    dir: at('sidecar'),
    args: ['--garbage-collection-period', '2s', '--garbage-collection-policy', 'LimitBased', '--max-backups', '1'],
  });
  onTestFinished(() => sidecar.kill());
  const { url } = sidecar;
  const writer = startWriter(client, { concurrency: 8 });
  const store = new LocalStore(storeDir);
  const fulls = async () => (await listSnapshots(store)).filter((e) => e.kind === 'Full');
  const collected = async (kind: string) =>
    (await metric(url, 'etcdbr_snapshot_gc_total', `kind="${kind}",succeeded="true"`)) ?? 0;

  await firstDelta(url);
  // two more fulls, deltas between them: the older fulls and their deltas are the policy's to drop
  for (let i = 0; i < 2; i++) {
    await waitFor('a delta after the last full', async () => {
      const entries = await listSnapshots(store);
      const newest = entries.filter((e) => e.kind === 'Full').at(-1)!;
      return entries.some((e) => e.kind === 'Incr' && e.lastRevision > newest.lastRevision);
    });
    expect((await fetch(`${url}/snapshot/full`, { method: 'POST' })).status).toBe(200);
  }
  await waitFor(
    'the garbage collector to delete the two older fulls',
    async () => (await collected('Full')) >= 2,
    60_000,
  );
  expect(await collected('Incr')).toBeGreaterThan(0);
  expect(await fulls()).toHaveLength(1);

  const written = await writer.stop();
  expect(written.writes).toBeGreaterThan(0);
  const source = await keyspaceOnceStored(client, url);
  expect(await sidecar.stop()).toBe(0);
  const log = await sidecar.log();
  expect(log).toMatch(/"msg":"garbage collection done","deleted":[1-9]/);
  const entries = await listSnapshots(store);
  expect(chainProblems(entries)).toEqual([]);
  // nothing older than the newest full is left (LimitBased 1, deltas kept 0s): the chain is the newest full and its deltas
  const [full] = await fulls();
  expect(entries.every((e) => e.name === full.name || (e.kind === 'Incr' && e.lastRevision > full.lastRevision))).toBe(
    true,
  );
  expect((await expectRestored(store, at('restore'), source)).deltas).toBeGreaterThan(0);
});
