import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { type Etcd3, LocalStore, listSnapshots, parseSnapshotName, type SnapshotRef } from '@etcd-steward/core';
import { afterEach, describe, expect, it } from 'vitest';
import { type Member, putMany, restartableMember, restoreMember } from './restartable-member.js';
import { restoreAndFingerprint } from './restore-program.js';
import {
  etcdRevision,
  keyspaceOnceStored,
  metric,
  type SidecarProcess,
  snapshotsReach,
  startSidecar,
  waitFor,
} from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('store-history');

/** The bad writes a restore to an earlier revision undoes: every key deleted, then 30 more writes. */
async function badWrites(client: Etcd3): Promise<void> {
  await client.delete().prefix('/keep/').exec();
  await putMany(client, '/bad/', 30);
}

const members: Member[] = [];
const sidecars: SidecarProcess[] = [];
afterEach(async () => {
  for (const s of sidecars.splice(0)) await s.kill();
  for (const m of members.splice(0)) await m.stop();
});

async function sidecarOn(member: Member, storeDir: string, dir: string): Promise<SidecarProcess> {
  const sidecar = await startSidecar({ endpoint: member.endpoint, store: `file://${storeDir}`, dir });
  sidecars.push(sidecar);
  return sidecar;
}

async function stopSidecar(sidecar: SidecarProcess): Promise<void> {
  sidecars.splice(sidecars.indexOf(sidecar), 1);
  expect(await sidecar.stop()).toBe(0);
}

/**
 * The runbook: 20 keys written (revision R), the bad writes, the sidecar and etcd stopped, the member restored to R
 * from the store, etcd (then `beforeSidecar`) and the sidecar started again on the same store, 40 new writes. Returns the live keyspace
 * once the store holds it, the sidecar's log and R.
 */
async function restoreBeforeBadWrites(
  dir: string,
  restoreFlags: string[],
  beforeSidecar: (client: Etcd3) => Promise<void> = async () => {},
) {
  const storeDir = join(dir, 'store');
  const member = await restartableMember(dir);
  members.push(member);
  let client = await member.start();
  let sidecar = await sidecarOn(member, storeDir, join(dir, 'sidecar-1'));
  await waitFor('the start-up full snapshot', () => snapshotsReach(sidecar.url, 1));
  await putMany(client, '/keep/', 20);
  const beforeBadWrites = await etcdRevision(client);
  await badWrites(client);
  await keyspaceOnceStored(client, sidecar.url);
  await stopSidecar(sidecar);
  await member.stop();

  const restored = await restoreMember(member, `file://${storeDir}`, [
    '--to-revision',
    String(beforeBadWrites),
    ...restoreFlags,
  ]);
  expect(restored.revision).toBe(beforeBadWrites);

  client = await member.start();
  await beforeSidecar(client);
  sidecar = await sidecarOn(member, storeDir, join(dir, 'sidecar-2'));
  await putMany(client, '/new/', 40);
  const live = await keyspaceOnceStored(client, sidecar.url);
  expect(live.keys).toBe(60);
  const log = await sidecar.log();
  await stopSidecar(sidecar);
  return { storeDir, live, log, beforeBadWrites, restored };
}

describe('a store holds the history the cluster really has', () => {
  it('after the runbook restore to a revision before a bad write, the sidecar notices the fork: the store restores exactly what the cluster holds', async () => {
    const dir = at('fork-noticed');
    const { storeDir, live, log, beforeBadWrites } = await restoreBeforeBadWrites(dir, []);
    expect(log).toMatch(/etcd's history left the store's/);
    const forks = await readdir(join(storeDir, 'forks'));
    expect(forks).toHaveLength(1);
    // The bad writes' snapshots are set aside, not deleted; none in the chain ends between them and the fork.
    expect((await readdir(join(storeDir, 'forks', forks[0]))).length).toBeGreaterThan(0);
    const restored = await restoreAndFingerprint(`file://${storeDir}`, dir, 'after-fork');
    expect(restored.fingerprint).toEqual(live);
    // The undone revisions restore as the new history has them.
    const before = await restoreAndFingerprint(`file://${storeDir}`, dir, 'at-fork', [
      '--to-revision',
      String(beforeBadWrites + 5),
    ]);
    expect(before.fingerprint.keys).toBe(25);
  });

  it('etcd-restore --fork records the fork itself: the later snapshots are set aside before the sidecar starts', async () => {
    const dir = at('fork-recorded');
    const { storeDir, live, log, restored } = await restoreBeforeBadWrites(dir, ['--fork']);
    expect(restored.setAside.folder).toMatch(/^forks\/\d+-\d+$/);
    expect(restored.setAside.snapshots.length).toBeGreaterThan(0);
    const setAside = await readdir(join(storeDir, restored.setAside.folder));
    expect(setAside.sort()).toEqual(restored.setAside.snapshots.map((n: string) => n.split('/').pop()).sort());
    // Nothing left for the sidecar to notice.
    expect(log).not.toMatch(/etcd's history left the store's/);
    expect((await restoreAndFingerprint(`file://${storeDir}`, dir, 'after-fork')).fingerprint).toEqual(live);
  });

  it('etcd-restore --fork to a revision inside a delta keeps its revisions up to there in the chain: etcd compacting them before the sidecar starts loses none', async () => {
    const dir = at('fork-inside-delta');
    const { storeDir, restored, beforeBadWrites } = await restoreBeforeBadWrites(dir, ['--fork'], async (client) => {
      await client.kv.compact({ revision: String(await etcdRevision(client)), physical: true });
    });
    // the 20 writes and the bad ones went into one delta, which the fork splits
    const straddling = restored.setAside.snapshots
      .map((name: string) => parseSnapshotName(name)!)
      .find((ref: SnapshotRef) => ref.kind === 'Incr' && ref.startRevision <= beforeBadWrites);
    expect(straddling).toBeDefined();
    const chain = await listSnapshots(new LocalStore(storeDir));
    expect(
      chain.filter((e) => e.kind === 'Incr' && e.lastRevision === beforeBadWrites).map((e) => e.startRevision),
    ).toEqual([straddling.startRevision]);
    // every revision up to the fork still restores as the cluster wrote it: 5 before it, 15 of the 20 keys
    const before = await restoreAndFingerprint(`file://${storeDir}`, dir, 'inside', [
      '--to-revision',
      String(beforeBadWrites - 5),
    ]);
    expect(before.fingerprint.keys).toBe(15);
  });

  it('a new, empty etcd on an old store: the sidecar refuses to write, says so, and the store still restores the old cluster', async () => {
    const dir = at('foreign');
    const storeDir = join(dir, 'store');
    const old = await restartableMember(join(dir, 'old'));
    members.push(old);
    const oldClient = await old.start();
    const oldSidecar = await sidecarOn(old, storeDir, join(dir, 'sidecar-old'));
    await waitFor('the start-up full snapshot', () => snapshotsReach(oldSidecar.url, 1));
    await putMany(oldClient, '/old/', 30);
    const oldKeyspace = await keyspaceOnceStored(oldClient, oldSidecar.url);
    await stopSidecar(oldSidecar);
    await old.stop();
    const before = (await listSnapshots(new LocalStore(storeDir))).map((e) => e.name);

    // The new cluster has written past the old store's head, so revisions alone would let its deltas continue.
    const fresh = await restartableMember(join(dir, 'new'));
    members.push(fresh);
    const freshClient = await fresh.start();
    await putMany(freshClient, '/new/', 40);
    expect(await etcdRevision(freshClient)).toBeGreaterThan(oldKeyspace.revision);
    const sidecar = await sidecarOn(fresh, storeDir, join(dir, 'sidecar-new'));
    await waitFor('the refusal', async () => (await metric(sidecar.url, 'etcd_snapshot_history_refused')) === 1);
    const health = await fetch(`${sidecar.url}/healthz`);
    expect(health.status).toBe(503);
    await putMany(freshClient, '/more/', 5);
    await new Promise((r) => setTimeout(r, 2_000)); // two delta periods
    expect(await sidecar.log()).toMatch(/refusing to take snapshots.*holds another history than etcd's/);
    await stopSidecar(sidecar);

    expect((await listSnapshots(new LocalStore(storeDir))).map((e) => e.name)).toEqual(before);
    expect((await restoreAndFingerprint(`file://${storeDir}`, dir, 'restored-old')).fingerprint).toEqual(oldKeyspace);
  });
});
