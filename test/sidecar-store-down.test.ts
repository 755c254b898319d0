import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort, LocalStore, listSnapshots, takeFullSnapshot } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { gatedS3Store } from './gated-s3-store.js';
import { runProgram } from './run-program.js';
import { startS3Server, writeS3Credentials } from './servers/s3-server.js';
import {
  chainProblems,
  etcdRevision,
  expectRestored,
  firstDelta,
  keyspaceOnceStored,
  metric,
  startSidecar,
  startWriter,
  waitFor,
} from './sidecar-helpers.js';
import { switchableStore } from './switchable-store.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-store-down-');

/** A one-member cluster under steady writes; the writer and the cluster stop when the test ends, however it ends. */
async function clusterUnderWrites() {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const client = cluster.client();
  const writer = startWriter(client, { concurrency: 4 });
  onTestFinished(() =>
    writer.stop().then(
      () => undefined,
      () => undefined,
    ),
  );
  return { cluster, client, writer };
}

/**
 * A one-member cluster under steady writes and a sidecar on `storeUrl` that has stored its first delta; the
 * writer, the sidecar and the cluster stop when the test ends, however it ends.
 */
async function sidecarUnderWrites(storeUrl: string, name: string, args: string[] = []) {
  const { cluster, client, writer } = await clusterUnderWrites();
  const sidecar = await startSidecar({ endpoint: cluster.endpoints[0], store: storeUrl, dir: at(name), args });
  onTestFinished(() => sidecar.kill());
  await firstDelta(sidecar.url);
  return { client, sidecar, url: sidecar.url, writer };
}

it('with the store gone for several delta periods no event is lost: deltas spool, the spool drains on recovery', async () => {
  const store = await switchableStore(at, 'store');
  const real = await store.directory('real');
  await store.point(real);
  // A file, which even root cannot write into.
  const notADirectory = at('not-a-directory');
  await writeFile(notADirectory, 'not a directory');
  // A small spool, so that it fills during the outage and the sidecar must stop reading etcd.
  const { client, sidecar, url, writer } = await sidecarUnderWrites(store.url, 'sidecar', [
    '--spool-max-bytes',
    '16Ki',
  ]);

  await store.point(notADirectory); // the store goes away
  const before = (await readdir(join(real, 'v2'))).length;
  await waitFor(
    'deltas to wait in the spool',
    async () => ((await metric(url, 'etcd_snapshot_spool_deltas')) ?? 0) > 0,
  );
  // On a loaded machine the writer is slow: wait for the spool to fill rather than a fixed time.
  await waitFor('the spool to fill', async () => /the spool is full: not reading etcd/.test(await sidecar.log()));
  await new Promise((r) => setTimeout(r, 2_000));
  expect(await metric(url, 'etcdbr_snapshotter_failure', 'error="store"')).toBeGreaterThan(0);
  expect(await metric(url, 'etcd_snapshot_store_reachable')).toBe(0);
  expect((await fetch(`${url}/healthz`)).status).toBe(503);
  expect(await metric(url, 'etcd_snapshot_spool_bytes')).toBeGreaterThan(0);
  // Memory stays bounded: the watch is not read while the buffer is at its limit (256 KiB in these tests).
  expect(await metric(url, 'etcd_snapshot_buffered_bytes')).toBeLessThan(1 << 20);
  expect((await readdir(join(real, 'v2'))).length).toBe(before);

  await store.point(real);
  await waitFor('the spool to drain', async () => (await metric(url, 'etcd_snapshot_spool_deltas')) === 0);
  expect(await metric(url, 'etcd_snapshot_store_reachable')).toBe(1);
  const written = await writer.stop();
  const source = await keyspaceOnceStored(client, url);
  console.log(`store-down writer: ${written.perSecond}/s, last revision ${source.revision}`);
  expect(await sidecar.stop()).toBe(0);

  const stored = new LocalStore(real);
  expect(chainProblems(await listSnapshots(stored))).toEqual([]);
  await expectRestored(stored, at('restore'), source);
});

it('with the store emptied under it, a new chain starts with a full snapshot and restores the exact keyspace', async () => {
  const store = await switchableStore(at, 'emptied');
  await store.point(await store.directory('first'));
  const { client, sidecar, url, writer } = await sidecarUnderWrites(store.url, 'sidecar-emptied');

  const second = await store.directory('second');
  await store.point(second); // as if someone deleted every object
  const fulls = async () => (await listSnapshots(new LocalStore(second))).filter((e) => e.kind === 'Full');
  await waitFor('a full snapshot in the emptied store', async () => (await fulls()).length > 0);
  await new Promise((r) => setTimeout(r, 2_000));
  await writer.stop();
  const source = await keyspaceOnceStored(client, url);
  expect(await sidecar.stop()).toBe(0);
  expect(await sidecar.log()).not.toMatch(/do not continue the chain/);

  const stored = new LocalStore(second);
  // From the new full snapshot on. (A delta whose upload was under way when the store was switched may have landed
  // before it, with no base: restores never read it.)
  const entries = await listSnapshots(stored);
  expect(chainProblems(entries.slice(entries.findIndex((e) => e.kind === 'Full')))).toEqual([]);
  await expectRestored(stored, at('restore-emptied'), source);
});

/**
 * An S3 store that is down when a sidecar starts on it, under steady writes to a one-member cluster: the store
 * comes up with `gate.open()`; `direct` is the store as the test reaches it, always up. Everything stops when
 * the test ends, however it ends.
 */
async function sidecarWithS3DownAtStart(name: string) {
  const { storeUrl, direct, gate } = await gatedS3Store(at, name);
  const { cluster, client, writer } = await clusterUnderWrites();
  const sidecar = await startSidecar({ endpoint: cluster.endpoints[0], store: storeUrl, dir: at(name) });
  onTestFinished(() => sidecar.kill());
  return { cluster, client, writer, sidecar, url: sidecar.url, gate, direct };
}

it('with the S3 store down at start the sidecar runs, says so, spools a full snapshot and the deltas after it, and uploads them once the store is up: etcd compacting meanwhile loses nothing', async () => {
  const { client, writer, sidecar, url, gate, direct: stored } = await sidecarWithS3DownAtStart('sidecar-s3-down');

  await waitFor('the outage to show', async () => (await metric(url, 'etcd_snapshot_store_reachable')) === 0);
  expect((await fetch(`${url}/healthz`)).status).toBe(503);
  expect(await metric(url, 'etcdbr_snapshot_required', 'kind="Full"')).toBe(1);
  // The full snapshot and the deltas after it wait in the spool.
  await waitFor('deltas in the spool', async () => ((await metric(url, 'etcd_snapshot_spool_deltas')) ?? 0) > 1);
  await new Promise((r) => setTimeout(r, 3_000)); // writes go on meanwhile
  expect((await fetch(`${url}/healthz`)).status).toBe(503);
  // etcd forgets the history written during the outage: only the spool still has it.
  const compactedAt = await etcdRevision(client);
  await client.kv.compact({ revision: String(compactedAt), physical: true });

  await gate.open();
  await waitFor('the store to be used', async () => (await metric(url, 'etcd_snapshot_store_reachable')) === 1);
  await firstDelta(url);
  expect((await fetch(`${url}/healthz`)).status).toBe(200);
  await writer.stop();
  const source = await keyspaceOnceStored(client, url);
  expect(await sidecar.stop()).toBe(0);
  const log = await sidecar.log();
  expect(log.match(/the store is unreachable at start/g)).toHaveLength(1);
  expect(log.match(/the store does not answer/g)?.length ?? 0).toBeLessThanOrEqual(1);
  expect(log).toMatch(/the store is reachable again/);

  const entries = await listSnapshots(stored);
  expect(chainProblems(entries)).toEqual([]);
  // One chain, from the full snapshot taken into the spool before the compaction: every revision written during
  // the outage is in a delta.
  const fulls = entries.filter((e) => e.kind === 'Full');
  expect(fulls).toHaveLength(1);
  expect(fulls[0].lastRevision).toBeLessThan(compactedAt);
  const deltas = entries.filter((e) => e.kind === 'Incr');
  expect(deltas[0].startRevision).toBe(fulls[0].lastRevision + 1);
  expect(deltas.at(-1)?.lastRevision).toBe(source.revision);
  expect(log).not.toMatch(/compacted its history/);
  await expectRestored(stored, at('restore-s3-down'), source);
});

it('with the S3 store down at start, revisions the watch read but had not spooled when etcd compacted them stay in a delta once the store answers', async () => {
  // No delta is finished before the store answers: the revisions past the spooled full snapshot live in the watch.
  const { storeUrl, direct, gate } = await gatedS3Store(at, 'sidecar-s3-unflushed');
  const { cluster, client, writer } = await clusterUnderWrites();
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: storeUrl,
    dir: at('sidecar-s3-unflushed'),
    args: ['--delta-snapshot-period', '60s', '--delta-snapshot-memory-limit', '64Mi'],
  });
  onTestFinished(() => sidecar.kill());
  await waitFor('a spooled full snapshot', async () => /full snapshot spooled/.test(await sidecar.log()));
  await new Promise((r) => setTimeout(r, 1_500));
  await writer.stop();
  // etcd forgets what the watch read: only the sidecar's memory still has it.
  const compactedAt = await etcdRevision(client);
  await client.kv.compact({ revision: String(compactedAt), physical: true });

  await gate.open();
  await waitFor('the chain to resume', async () => /chain resumes/.test(await sidecar.log()));
  expect((await fetch(`${sidecar.url}/snapshot/delta`, { method: 'POST' })).status).toBe(200);
  const source = await keyspaceOnceStored(client, sidecar.url);
  expect(await sidecar.stop()).toBe(0);

  const entries = await listSnapshots(direct);
  expect(chainProblems(entries)).toEqual([]);
  const fulls = entries.filter((e) => e.kind === 'Full');
  expect(fulls.map((e) => e.lastRevision)).toEqual([fulls[0].lastRevision]);
  const deltas = entries.filter((e) => e.kind === 'Incr');
  expect(deltas[0]?.startRevision).toBe(fulls[0].lastRevision + 1);
  expect(deltas.at(-1)?.lastRevision).toBeGreaterThanOrEqual(compactedAt);
  expect(await sidecar.log()).not.toMatch(/compacted its history/);
  await expectRestored(direct, at('restore-s3-unflushed'), source);
});

it('with the S3 store down at start, a newer full snapshot another writer stored meanwhile wins over the spooled chain: the chain continues it', async () => {
  const { cluster, client, writer, sidecar, url, gate, direct } = await sidecarWithS3DownAtStart('sidecar-s3-newer');
  await waitFor('deltas in the spool', async () => ((await metric(url, 'etcd_snapshot_spool_deltas')) ?? 0) > 1);
  await mkdir(at('manual'));
  // As a manual `etcd-snapshot save` that reaches the store while the sidecar cannot.
  const manual = await takeFullSnapshot({
    connection: { endpoints: cluster.endpoints },
    store: direct,
    compression: 'zstd',
    tempDir: at('manual'),
  });
  await new Promise((r) => setTimeout(r, 2_000)); // more deltas spooled past it

  await gate.open();
  await waitFor('the store to be used', async () => (await metric(url, 'etcd_snapshot_store_reachable')) === 1);
  await firstDelta(url);
  await writer.stop();
  const source = await keyspaceOnceStored(client, url);
  expect(await sidecar.stop()).toBe(0);

  const entries = await listSnapshots(direct);
  expect(chainProblems(entries)).toEqual([]);
  // The spooled full snapshot is older than the store's: it was not uploaded, and the deltas continue the newer one,
  // the first of them from the spooled delta that goes on through it.
  expect(entries.filter((e) => e.kind === 'Full').map((e) => e.lastRevision)).toEqual([manual.revision]);
  const first = entries.find((e) => e.kind === 'Incr');
  expect(first?.startRevision).toBeLessThanOrEqual(manual.revision + 1);
  expect(first?.lastRevision).toBeGreaterThan(manual.revision);
  await expectRestored(direct, at('restore-s3-newer'), source);
});

it('a misconfigured store is still exit 2 at start: a bucket that does not exist', async () => {
  const s3 = await startS3Server({ buckets: ['backups'] });
  onTestFinished(() => s3.stop());
  const credentials = at('s3-credentials-2.json');
  await writeS3Credentials(credentials, s3);
  const result = await runProgram(
    'etcd-snapshot',
    [
      'run',
      '--endpoints',
      `http://127.0.0.1:${await freePort()}`,
      '--store',
      `s3://no-such-bucket/etcd?endpoint=${encodeURIComponent(s3.endpoint)}`,
      '--spool-dir',
      at('misconfigured', 'spool'),
      '--server-port',
      String(await freePort()),
    ],
    { AWS_APPLICATION_CREDENTIALS_JSON: credentials, AWS_EC2_METADATA_DISABLED: 'true' },
  );
  expect(result.code).toBe(2);
  expect(result.stderr).toMatch(/no-such-bucket.{0,4} does not exist: create it/);
});
