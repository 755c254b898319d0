import { mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keyspaceFingerprint, LocalStore, listSnapshots } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/core/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  chainProblems,
  metric,
  restoreNewestChain,
  type SidecarProcess,
  snapshotsReach,
  startSidecar,
  startWriter,
  waitFor,
} from './sidecar-helpers.js';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sidecar-store-down-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

it('with the store gone for several delta periods no event is lost: deltas spool, the spool drains on recovery', async () => {
  const cluster = await startCluster();
  const storeDir = join(dir, 'store');
  const away = join(dir, 'store.away');
  let sidecar: SidecarProcess | undefined;
  try {
    const client = cluster.client();
    // A small spool, so that it fills during the outage and the sidecar must stop reading etcd.
    sidecar = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: `file://${storeDir}`,
      dir: join(dir, 'sidecar'),
      args: ['--spool-max-bytes', '16Ki'],
    });
    const { url } = sidecar;
    const writer = startWriter(client, { concurrency: 4 });
    await waitFor(
      'the first delta',
      async () => ((await metric(url, 'etcdbr_snapshot_latest_revision', 'kind="Incr"')) ?? 0) > 0,
    );

    // The store goes away: its path is now a file, which even root cannot write into.
    await rename(storeDir, away);
    await writeFile(storeDir, 'not a directory');
    const before = (await readdir(join(away, 'v2'))).length;
    await waitFor(
      'deltas to wait in the spool',
      async () => ((await metric(url, 'etcd_snapshot_spool_deltas')) ?? 0) > 0,
    );
    await new Promise((r) => setTimeout(r, 5_000));
    expect(await metric(url, 'etcdbr_snapshotter_failure', 'error="store"')).toBeGreaterThan(0);
    expect(await metric(url, 'etcd_snapshot_spool_bytes')).toBeGreaterThan(0);
    // Memory stays bounded: the watch is not read while the buffer is at its limit (256 KiB in these tests).
    expect(await metric(url, 'etcd_snapshot_buffered_bytes')).toBeLessThan(1 << 20);
    expect((await readdir(join(away, 'v2'))).length).toBe(before);
    expect(await sidecar.log()).toMatch(/the spool is full: not reading etcd/);

    await rm(storeDir);
    await rename(away, storeDir);
    await waitFor('the spool to drain', async () => (await metric(url, 'etcd_snapshot_spool_deltas')) === 0);
    const written = await writer.stop();
    const source = await keyspaceFingerprint(client);
    console.log(`store-down writer: ${written.perSecond}/s, last revision ${source.revision}`);
    await waitFor('the deltas to reach the last revision', () => snapshotsReach(url, source.revision));
    expect(await sidecar.stop()).toBe(0);
    sidecar = undefined;

    const store = new LocalStore(storeDir);
    expect(chainProblems(await listSnapshots(store))).toEqual([]);
    const restored = await restoreNewestChain(store, join(dir, 'restore'));
    expect({ revision: restored.revision, keys: restored.keys, sha256: restored.sha256 }).toEqual(source);
  } finally {
    await sidecar?.kill();
    await cluster.stop();
  }
});
