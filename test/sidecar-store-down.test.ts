import { mkdir, mkdtemp, readdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
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

/**
 * A local store behind a symlink, switched in one rename: the sidecar never sees the moment between two states
 * (renaming a directory away and putting something in its place would show it no store at all for a moment,
 * which a listing reads as an empty store).
 */
async function switchableStore(name: string) {
  const url = `file://${join(dir, name)}`;
  const point = async (target: string) => {
    await symlink(target, join(dir, `${name}.next`));
    await rename(join(dir, `${name}.next`), join(dir, name));
  };
  const directory = async (suffix: string) => {
    const path = join(dir, `${name}.${suffix}`);
    await mkdir(path);
    return path;
  };
  return { url, point, directory };
}

it('with the store gone for several delta periods no event is lost: deltas spool, the spool drains on recovery', async () => {
  const cluster = await startCluster();
  const store = await switchableStore('store');
  const real = await store.directory('real');
  await store.point(real);
  // A file, which even root cannot write into.
  const notADirectory = join(dir, 'not-a-directory');
  await writeFile(notADirectory, 'not a directory');
  let sidecar: SidecarProcess | undefined;
  try {
    const client = cluster.client();
    // A small spool, so that it fills during the outage and the sidecar must stop reading etcd.
    sidecar = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: store.url,
      dir: join(dir, 'sidecar'),
      args: ['--spool-max-bytes', '16Ki'],
    });
    const { url } = sidecar;
    const writer = startWriter(client, { concurrency: 4 });
    await waitFor(
      'the first delta',
      async () => ((await metric(url, 'etcdbr_snapshot_latest_revision', 'kind="Incr"')) ?? 0) > 0,
    );

    await store.point(notADirectory); // the store goes away
    const before = (await readdir(join(real, 'v2'))).length;
    await waitFor(
      'deltas to wait in the spool',
      async () => ((await metric(url, 'etcd_snapshot_spool_deltas')) ?? 0) > 0,
    );
    await new Promise((r) => setTimeout(r, 5_000));
    expect(await metric(url, 'etcdbr_snapshotter_failure', 'error="store"')).toBeGreaterThan(0);
    expect(await metric(url, 'etcd_snapshot_spool_bytes')).toBeGreaterThan(0);
    // Memory stays bounded: the watch is not read while the buffer is at its limit (256 KiB in these tests).
    expect(await metric(url, 'etcd_snapshot_buffered_bytes')).toBeLessThan(1 << 20);
    expect((await readdir(join(real, 'v2'))).length).toBe(before);
    expect(await sidecar.log()).toMatch(/the spool is full: not reading etcd/);

    await store.point(real);
    await waitFor('the spool to drain', async () => (await metric(url, 'etcd_snapshot_spool_deltas')) === 0);
    const written = await writer.stop();
    const source = await keyspaceFingerprint(client);
    console.log(`store-down writer: ${written.perSecond}/s, last revision ${source.revision}`);
    await waitFor('the deltas to reach the last revision', () => snapshotsReach(url, source.revision));
    expect(await sidecar.stop()).toBe(0);
    sidecar = undefined;

    const stored = new LocalStore(real);
    expect(chainProblems(await listSnapshots(stored))).toEqual([]);
    const restored = await restoreNewestChain(stored, join(dir, 'restore'));
    expect({ revision: restored.revision, keys: restored.keys, sha256: restored.sha256 }).toEqual(source);
  } finally {
    await sidecar?.kill();
    await cluster.stop();
  }
});

it('with the store emptied under it, a new chain starts with a full snapshot and restores the exact keyspace', async () => {
  const cluster = await startCluster();
  const store = await switchableStore('emptied');
  await store.point(await store.directory('first'));
  let sidecar: SidecarProcess | undefined;
  try {
    const client = cluster.client();
    sidecar = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: store.url,
      dir: join(dir, 'sidecar-emptied'),
    });
    const { url } = sidecar;
    const writer = startWriter(client, { concurrency: 4 });
    await waitFor(
      'the first delta',
      async () => ((await metric(url, 'etcdbr_snapshot_latest_revision', 'kind="Incr"')) ?? 0) > 0,
    );

    const second = await store.directory('second');
    await store.point(second); // as if someone deleted every object
    const fulls = async () => (await listSnapshots(new LocalStore(second))).filter((e) => e.kind === 'Full');
    await waitFor('a full snapshot in the emptied store', async () => (await fulls()).length > 0);
    await new Promise((r) => setTimeout(r, 2_000));
    await writer.stop();
    const source = await keyspaceFingerprint(client);
    await waitFor('the deltas to reach the last revision', () => snapshotsReach(url, source.revision));
    expect(await sidecar.stop()).toBe(0);
    expect(await sidecar.log()).not.toMatch(/do not continue the chain/);
    sidecar = undefined;

    const stored = new LocalStore(second);
    // From the new full snapshot on. (A delta whose upload was under way when the store was switched may have landed
    // before it, with no base: restores never read it.)
    const entries = await listSnapshots(stored);
    expect(chainProblems(entries.slice(entries.findIndex((e) => e.kind === 'Full')))).toEqual([]);
    const restored = await restoreNewestChain(stored, join(dir, 'restore-emptied'));
    expect({ revision: restored.revision, keys: restored.keys, sha256: restored.sha256 }).toEqual(source);
  } finally {
    await sidecar?.kill();
    await cluster.stop();
  }
});
