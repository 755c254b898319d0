import { LocalStore, listSnapshots } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { startS3Server, writeS3Credentials } from './servers/s3-server.js';
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

it("the sidecar's garbage collector reads each full snapshot once, and again only once it changed", async () => {
  // ebr's default period is a minute: reading a multi-GB full at every run would download it 1440 times a day
  const server = await startS3Server({ buckets: ['backups'] });
  onTestFinished(() => server.stop());
  const credentials = at('s3-credentials.json');
  await writeS3Credentials(credentials, server);
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: `s3://backups/etcd?endpoint=${encodeURIComponent(server.endpoint)}`,
    dir: at('s3-sidecar'),
    args: ['--garbage-collection-period', '2s', '--garbage-collection-policy', 'Exponential'],
    env: { ...process.env, AWS_APPLICATION_CREDENTIALS_JSON: credentials, AWS_EC2_METADATA_DISABLED: 'true' },
  });
  onTestFinished(() => sidecar.kill());
  const runs = async () => ((await sidecar.log()).match(/"msg":"garbage collection (done|failed)"/g) ?? []).length;
  const fullReads = () => [...server.gets('backups')].filter(([key]) => key.includes('/v2/Full-'));
  const writer = startWriter(cluster.client(), { concurrency: 1 });
  onTestFinished(async () => void (await writer.stop()));
  await firstDelta(sidecar.url);
  await waitFor('two garbage collections', async () => (await runs()) >= 2, 60_000);
  const afterTwo = fullReads();
  expect(afterTwo).toHaveLength(1); // the one full snapshot, read (and checked) once
  const [[key, reads]] = afterTwo;
  const seen = await runs();
  await waitFor('two more garbage collections', async () => (await runs()) >= seen + 2, 60_000);
  expect(fullReads()).toEqual([[key, reads]]);

  // The same name, other bytes (one flipped near the end: etcd's sha256 trailer no longer matches): read again
  const authorization = `AWS4-HMAC-SHA256 Credential=${server.accessKeyId}/20260101/${server.region}/s3/aws4_request`;
  const url = `${server.endpoint}/backups/${key}`;
  const bytes = Buffer.from(await (await fetch(url, { headers: { authorization } })).arrayBuffer());
  bytes[bytes.length - 40] ^= 0xff;
  const put = await fetch(url, {
    method: 'PUT',
    headers: { authorization, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
    body: bytes,
  });
  expect(put.status).toBe(200);
  const changed = await runs();
  await waitFor('a garbage collection after the change', async () => (await runs()) >= changed + 2, 60_000);
  // our own GET above, then the collector's one read of the changed object, and none after
  expect(fullReads()).toEqual([[key, reads + 2]]);
  expect(await sidecar.log()).toMatch(/does not verify, so it cannot start the newest chain/);
  const settled = await runs();
  await waitFor('two more garbage collections', async () => (await runs()) >= settled + 2, 60_000);
  expect(fullReads()).toEqual([[key, reads + 2]]);
});
