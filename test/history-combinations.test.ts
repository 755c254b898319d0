import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  compactHistory,
  type Etcd3,
  keyspaceFingerprint,
  LocalStore,
  listSnapshots,
  METADATA_REVISION_DIGEST,
  openStore,
  type SnapStore,
} from '@etcd-steward/core';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { gatedS3Store } from './gated-s3-store.js';
import { type Member, putMany, restartableMember, restoreMember } from './restartable-member.js';
import { restoreAndFingerprint } from './restore-program.js';
import { runProgram, startProgram } from './run-program.js';
import { startFaultProxy } from './servers/fault-proxy.js';
import { startS3Server, writeS3Credentials } from './servers/s3-server.js';
import {
  deltaGaps,
  etcdRevision,
  keyspaceOnceStored,
  metric,
  type SidecarProcess,
  snapshotsReach,
  startSidecar,
  startWriter,
  waitFor,
} from './sidecar-helpers.js';
import { switchableStore } from './switchable-store.js';
import { tempDir } from './temp-dir.js';

/**
 * Operations that real clusters go through in combination, each of which once mixed two histories in the store or
 * left revisions in no delta (docs/concepts.md "The store's history"): a spool carried across a restore, a store down
 * at the sidecar's start after a fork, two full snapshots within one delta period, etcd compacted past a fork before
 * the sidecar starts, and a compaction racing a set-aside.
 */
const at = tempDir('history-combinations');

const members: Member[] = [];
const sidecars: SidecarProcess[] = [];
afterEach(async () => {
  for (const s of sidecars.splice(0)) await s.kill();
  for (const m of members.splice(0)) await m.stop();
});

async function member(dir: string): Promise<{ member: Member; client: Etcd3 }> {
  const m = await restartableMember(dir);
  members.push(m);
  return { member: m, client: await m.start() };
}

async function sidecarOn(m: Member, store: string, dir: string, args: string[] = []): Promise<SidecarProcess> {
  const sidecar = await startSidecar({ endpoint: m.endpoint, store, dir, args });
  sidecars.push(sidecar);
  return sidecar;
}

async function stopSidecar(sidecar: SidecarProcess): Promise<void> {
  sidecars.splice(sidecars.indexOf(sidecar), 1);
  await sidecar.stop();
}

/** The names of the store's snapshots in the chain (v2/), and of those set aside (forks/). */
async function storeObjects(store: SnapStore | string): Promise<{ chain: string[]; forks: string[] }> {
  const opened = typeof store === 'string' ? new LocalStore(store) : store;
  const base = (name: string) => name.split('/').pop() ?? '';
  // v2/ as it is: a listing of the chain would leave out a snapshot with a copy under forks/ whether or not it left
  const chain = (await opened.list('v2/')).map((o) => base(o.name)).filter((n) => /^(Full|Incr)-/.test(n));
  const forks = (await opened.list('forks/')).map((o) => base(o.name)).filter((n) => /^(Full|Incr)-/.test(n));
  return { chain, forks: forks.sort() };
}

/**
 * Once the sidecar's start-up full snapshot is in: 20 keys written and stored (revision R, returned), then the bad
 * writes a restore to R undoes (every key deleted, 30 more), stored too.
 */
async function keepThenBadWrites(client: Etcd3, sidecar: SidecarProcess): Promise<number> {
  await waitFor('the start-up full snapshot', () => snapshotsReach(sidecar.url, 1));
  await putMany(client, '/keep/', 20);
  const beforeBadWrites = (await keyspaceOnceStored(client, sidecar.url)).revision;
  await client.delete().prefix('/keep/').exec();
  await putMany(client, '/bad/', 30);
  await keyspaceOnceStored(client, sidecar.url);
  return beforeBadWrites;
}

/** A member whose local store holds the writes kept and the bad ones (keepThenBadWrites); it and its sidecar stopped. */
async function storedBadWrites(name: string) {
  const dir = at(name);
  const storeDir = join(dir, 'store');
  const { member: m, client } = await member(join(dir, 'etcd'));
  const sidecar = await sidecarOn(m, `file://${storeDir}`, join(dir, 'sidecar-1'));
  const beforeBadWrites = await keepThenBadWrites(client, sidecar);
  await stopSidecar(sidecar);
  await m.stop();
  return { dir, storeDir, m, beforeBadWrites };
}

describe('one history through combinations of operations', () => {
  it('a spool carried across a restore to the store newest revision is set aside, not uploaded into the new history', async () => {
    const dir = at('spool-across-restore');
    const store = await switchableStore(at, 'spool-across-restore-store');
    const up = await store.directory('up');
    await store.point(up);
    const { member: m, client } = await member(join(dir, 'etcd'));
    let sidecar = await sidecarOn(m, store.url, join(dir, 'sidecar'));
    await waitFor('the start-up full snapshot', () => snapshotsReach(sidecar.url, 1));
    await putMany(client, '/m/old', 20);
    const stored = await keyspaceOnceStored(client, sidecar.url);

    // The store goes away while writes arrive: their deltas wait in the spool, and stay there through a stop.
    const file = at('spool-across-restore-down');
    await writeFile(file, '');
    await store.point(file);
    await putMany(client, '/m/spooled', 40);
    await waitFor(
      'deltas in the spool',
      async () => ((await metric(sidecar.url, 'etcd_snapshot_spool_deltas')) ?? 0) >= 1,
    );
    await stopSidecar(sidecar);
    await m.stop();

    // The store is back; the member is restored to the store's newest revision and takes other writes.
    await store.point(up);
    const restored = await restoreMember(m, store.url, []);
    expect(restored.revision).toBe(stored.revision);
    const again = await m.start();
    await putMany(again, '/m/new', 60);

    sidecar = await sidecarOn(m, store.url, join(dir, 'sidecar'));
    const live = await keyspaceOnceStored(again, sidecar.url);
    const log = await sidecar.log();
    await stopSidecar(sidecar);
    expect((await restoreAndFingerprint(store.url, dir, 'newest')).fingerprint).toEqual(live);
    expect(log).toMatch(/spooled snapshots hold revisions etcd's history does not/);
    const { chain, forks } = await storeObjects(up);
    // What the spool held of the old history is kept, apart; none of it is in the chain.
    expect(forks.some((n) => n.startsWith(`Incr-${String(stored.revision + 1).padStart(8, '0')}`))).toBe(true);
    expect(chain.filter((n) => forks.includes(n))).toEqual([]);
  });

  it("a spool etcd compacted before it could be compared is proven by etcd's state: every revision of its own history stays in a delta", async () => {
    const dir = at('spool-compacted');
    const store = await switchableStore(at, 'spool-compacted-store');
    const up = await store.directory('up');
    await store.point(up);
    const { member: m, client } = await member(join(dir, 'etcd'));
    // One delta a minute: what is written below goes into one spooled delta as the sidecar stops.
    let sidecar = await sidecarOn(m, store.url, join(dir, 'sidecar'), ['--delta-snapshot-period', '60s']);
    await waitFor('the start-up full snapshot', () => snapshotsReach(sidecar.url, 1));
    const full = await etcdRevision(client);
    const file = at('spool-compacted-down');
    await writeFile(file, '');
    await store.point(file);
    await putMany(client, '/m/spooled', 40);
    const head = await etcdRevision(client);
    await stopSidecar(sidecar);
    const spooled = await readdir(join(dir, 'sidecar', 'spool', 'deltas'));
    expect(spooled.map((n) => Number(n.split('-')[2]))).toContain(head);

    // While no sidecar runs, etcd makes the delta's last keys again and compacts past all of it: its last revision
    // tells nothing any more, the keys written before it do.
    for (let i = 20; i < 40; i++) await client.delete().key(`/m/spooled${i}`).exec();
    await putMany(client, '/m/spooled', 40);
    await compactHistory({ endpoints: [m.endpoint] }, await etcdRevision(client), { timeoutMs: 30_000 });
    await store.point(up);
    sidecar = await sidecarOn(m, store.url, join(dir, 'sidecar'));
    const live = await keyspaceOnceStored(client, sidecar.url);
    const log = await sidecar.log();
    await stopSidecar(sidecar);
    expect(log).not.toMatch(/spooled snapshots hold revisions etcd's history does not/);
    expect((await storeObjects(up)).forks).toEqual([]);
    const inSpool = await restoreAndFingerprint(store.url, dir, 'spooled', ['--to-revision', String(full + 30)]);
    expect(inSpool.fingerprint.keys).toBe(30);
    expect((await restoreAndFingerprint(store.url, dir, 'newest')).fingerprint).toEqual(live);
  });

  it('a fork found with the store down at the start: nothing leaves the spool before the store history is checked', async () => {
    const dir = at('fork-store-down');
    const { storeUrl, directUrl, direct, gate } = await gatedS3Store(at, 'fork-store-down');
    await gate.open();
    const { member: m, client } = await member(join(dir, 'etcd'));
    let sidecar = await sidecarOn(m, storeUrl, join(dir, 'sidecar-1'));
    const beforeBadWrites = await keepThenBadWrites(client, sidecar);
    await stopSidecar(sidecar);
    await m.stop();
    const abandoned = (await storeObjects(direct)).chain.filter((n) => Number(n.split('-')[2]) > beforeBadWrites);
    expect(abandoned.length).toBeGreaterThan(0);

    // Restored to before the bad writes without --fork; the new history writes past the old head.
    await restoreMember(m, directUrl, ['--to-revision', String(beforeBadWrites)]);
    const again = await m.start();
    await putMany(again, '/new/', 40);
    await gate.close();
    sidecar = await sidecarOn(m, storeUrl, join(dir, 'sidecar-2'));
    await waitFor('a full snapshot in the spool', async () => /full snapshot spooled/.test(await sidecar.log()));
    await putMany(again, '/more/', 10);
    await sleep(1_500);
    await gate.open();
    const live = await keyspaceOnceStored(again, sidecar.url);
    const log = await sidecar.log();
    await stopSidecar(sidecar);
    expect(log).toMatch(/etcd's history left the store's/);
    const { chain, forks } = await storeObjects(direct);
    expect(forks.sort()).toEqual(expect.arrayContaining(abandoned));
    expect(chain.filter((n) => abandoned.includes(n))).toEqual([]);
    expect((await restoreAndFingerprint(directUrl, dir, 'newest')).fingerprint).toEqual(live);
  });

  it("the store down at the sidecar's start: what etcd wrote while no sidecar ran goes into a delta once the store answers", async () => {
    const dir = at('store-down-start');
    const { storeUrl, directUrl, direct, gate } = await gatedS3Store(at, 'store-down-start');
    await gate.open();
    const { member: m, client } = await member(join(dir, 'etcd'));
    let sidecar = await sidecarOn(m, storeUrl, join(dir, 'sidecar-1'));
    await waitFor('the start-up full snapshot', () => snapshotsReach(sidecar.url, 1));
    await putMany(client, '/before/', 20);
    const stored = (await keyspaceOnceStored(client, sidecar.url)).revision;
    await stopSidecar(sidecar);
    // written while no sidecar runs; then the sidecar starts with the store down and starts a chain in its spool
    await putMany(client, '/unwatched/', 40);
    const unwatched = await etcdRevision(client);
    await gate.close();
    sidecar = await sidecarOn(m, storeUrl, join(dir, 'sidecar-2'), ['--delta-snapshot-period', '1s']);
    await waitFor('a full snapshot in the spool', async () => /full snapshot spooled/.test(await sidecar.log()));
    // deltas after it wait in the spool too: the chain goes on from them once the store answers
    await putMany(client, '/after/', 10);
    await waitFor(
      'a delta in the spool after the full snapshot',
      async () => ((await metric(sidecar.url, 'etcd_snapshot_spool_deltas')) ?? 0) >= 2,
    );
    await gate.open();
    const live = await keyspaceOnceStored(client, sidecar.url);
    await stopSidecar(sidecar);
    const log = await sidecar.log(); // whole once it stopped
    expect(log).toMatch(/stored etcd's history up to a spooled full snapshot as a delta/);
    expect(deltaGaps(await listSnapshots(direct))).toEqual([]);
    // a revision no sidecar watched restores as etcd wrote it
    const mid = Math.floor((stored + unwatched) / 2);
    const restored = await restoreAndFingerprint(directUrl, dir, 'unwatched', ['--to-revision', String(mid)]);
    expect(restored.fingerprint).toEqual(await keyspaceFingerprint(client, mid));
    expect((await restoreAndFingerprint(directUrl, dir, 'newest')).fingerprint).toEqual(live);
  });

  it('a full snapshot stored past the deltas, etcd compacted before a delta caught up: the sidecar says which revisions no delta holds', async () => {
    const dir = at('full-past-deltas');
    const storeDir = join(dir, 'store');
    const { member: m, client } = await member(join(dir, 'etcd'));
    const sidecar = await sidecarOn(m, `file://${storeDir}`, join(dir, 'sidecar-1'));
    await waitFor('the start-up full snapshot', () => snapshotsReach(sidecar.url, 1));
    await putMany(client, '/before/', 20);
    const deltaHead = (await keyspaceOnceStored(client, sidecar.url)).revision;
    await stopSidecar(sidecar);
    // While no sidecar runs: writes, a full snapshot of them (as a sidecar killed right after taking one leaves the
    // store), and etcd compacting them away.
    await putMany(client, '/unwatched/', 30);
    const saved = await runProgram('etcd-snapshot', [
      'save',
      '--endpoints',
      m.endpoint,
      '--store',
      `file://${storeDir}`,
    ]);
    expect(saved.code, saved.stderr).toBe(0);
    const compacted = await etcdRevision(client);
    await compactHistory({ endpoints: [m.endpoint] }, compacted, { timeoutMs: 30_000 });

    const again = await sidecarOn(m, `file://${storeDir}`, join(dir, 'sidecar-2'));
    await putMany(client, '/after/', 10);
    const live = await keyspaceOnceStored(client, again.url);
    await stopSidecar(again);
    expect(await again.log()).toContain(
      `the deltas go on after the full snapshot","neededRevision":${deltaHead + 1},"compactRevision":${compacted}`,
    );
    expect((await restoreAndFingerprint(`file://${storeDir}`, dir, 'newest')).fingerprint).toEqual(live);
  });

  it('a snapshot removed by gc or compaction while the sidecar checks the store is no outage: it lists the store again', async () => {
    const dir = at('store-changed');
    const s3 = await startS3Server({ buckets: ['backups'] });
    onTestFinished(() => s3.stop());
    const credentials = join(dir, 's3-credentials.json');
    await mkdir(dir, { recursive: true });
    await writeS3Credentials(credentials, s3);
    process.env.AWS_APPLICATION_CREDENTIALS_JSON = credentials;
    process.env.AWS_EC2_METADATA_DISABLED = 'true';
    let vanishing: string | undefined;
    // while `vanishing` is set, its next read finds it gone, as after etcd-gc deleted it
    const proxy = await startFaultProxy({
      target: s3.endpoint,
      answer: (req) => {
        if (req.method !== 'GET' || !vanishing || !req.url?.split('?')[0].endsWith(`/${vanishing}`)) return undefined;
        vanishing = undefined;
        return {
          status: 404,
          headers: { 'content-type': 'application/xml' },
          body: '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>',
        };
      },
    });
    onTestFinished(() => proxy.stop());
    const url = `s3://backups/etcd?endpoint=${encodeURIComponent(proxy.endpoint)}`;
    const { member: m, client } = await member(join(dir, 'etcd'));
    let sidecar = await sidecarOn(m, url, join(dir, 'sidecar-1'));
    await waitFor('the start-up full snapshot', () => snapshotsReach(sidecar.url, 1));
    await putMany(client, '/a/', 20);
    await keyspaceOnceStored(client, sidecar.url);
    await stopSidecar(sidecar);
    const direct = await openStore(`s3://backups/etcd?endpoint=${encodeURIComponent(s3.endpoint)}`);
    onTestFinished(() => direct.close?.());
    vanishing = (await listSnapshots(direct)).filter((e) => e.kind === 'Incr').at(-1)?.name;
    expect(vanishing).toBeDefined();

    await putMany(client, '/b/', 20);
    sidecar = await sidecarOn(m, url, join(dir, 'sidecar-2'));
    const live = await keyspaceOnceStored(client, sidecar.url);
    await stopSidecar(sidecar);
    const log = await sidecar.log(); // whole once it stopped
    expect(vanishing).toBeUndefined(); // the check read it, and found it gone
    expect(log).toMatch(/the store changed while its history was checked/);
    expect(log).not.toMatch(/the store does not answer|full snapshot spooled/);
    expect(deltaGaps(await listSnapshots(direct))).toEqual([]);
    expect((await restoreAndFingerprint(url, dir, 'newest')).fingerprint).toEqual(live);
  });

  it('another cluster found with the store down at the start: refused once the store answers, the store untouched', async () => {
    const dir = at('foreign-store-down');
    const { storeUrl, directUrl, direct, gate } = await gatedS3Store(at, 'foreign-store-down');
    await gate.open();
    const old = await member(join(dir, 'old'));
    const oldSidecar = await sidecarOn(old.member, storeUrl, join(dir, 'sidecar-old'));
    await waitFor('the start-up full snapshot', () => snapshotsReach(oldSidecar.url, 1));
    await putMany(old.client, '/old/', 30);
    const oldKeyspace = await keyspaceOnceStored(old.client, oldSidecar.url);
    await stopSidecar(oldSidecar);
    await old.member.stop();
    const before = await storeObjects(direct);

    const fresh = await member(join(dir, 'new'));
    await putMany(fresh.client, '/new/', 40);
    await gate.close();
    const sidecar = await sidecarOn(fresh.member, storeUrl, join(dir, 'sidecar-new'));
    await waitFor('a full snapshot in the spool', async () => /full snapshot spooled/.test(await sidecar.log()));
    await putMany(fresh.client, '/more/', 10);
    await sleep(1_500);
    await gate.open();
    await waitFor('the refusal', async () => (await metric(sidecar.url, 'etcd_snapshot_history_refused')) === 1);
    expect((await fetch(`${sidecar.url}/healthz`)).status).toBe(503);
    await sleep(2_000);
    await stopSidecar(sidecar);
    expect(await storeObjects(direct)).toEqual(before);
    expect((await restoreAndFingerprint(directUrl, dir, 'restored-old')).fingerprint).toEqual(oldKeyspace);
  });

  it('etcd restored to an earlier revision under a running sidecar: the sidecar checks the history again before it goes on', async () => {
    const dir = at('restored-under-sidecar');
    const storeDir = join(dir, 'store');
    const { member: m, client } = await member(join(dir, 'etcd'));
    const sidecar = await sidecarOn(m, `file://${storeDir}`, join(dir, 'sidecar'));
    const beforeBadWrites = await keepThenBadWrites(client, sidecar);
    const abandoned = (await storeObjects(storeDir)).chain.filter((n) => Number(n.split('-')[2]) > beforeBadWrites);

    // The sidecar runs on while its etcd is stopped, restored (without --fork) and started again.
    await m.stop();
    await restoreMember(m, `file://${storeDir}`, ['--to-revision', String(beforeBadWrites)]);
    const again = await m.start();
    // More new writes than bad ones: etcd goes past the chain's position before the watch is back.
    await putMany(again, '/new/', 40);
    const live = await keyspaceOnceStored(again, sidecar.url);
    const log = await sidecar.log();
    await stopSidecar(sidecar);
    expect((await restoreAndFingerprint(`file://${storeDir}`, dir, 'newest')).fingerprint).toEqual(live);
    expect(log).toMatch(/etcd's history left the store's/);
    const { chain, forks } = await storeObjects(storeDir);
    expect(forks).toEqual(expect.arrayContaining(abandoned));
    expect(chain.filter((n) => abandoned.includes(n))).toEqual([]);
  });

  it('full snapshots asked for within one delta period leave every revision in a delta', async () => {
    const dir = at('full-burst');
    const storeDir = join(dir, 'store');
    const { member: m, client } = await member(join(dir, 'etcd'));
    const sidecar = await sidecarOn(m, `file://${storeDir}`, join(dir, 'sidecar'), [
      ...['--delta-snapshot-period', '3s', '--delta-snapshot-memory-limit', '64Mi'],
    ]);
    await waitFor('the start-up full snapshot', () => snapshotsReach(sidecar.url, 1));
    // A steady trickle of writes, so that the open delta spans several full snapshots.
    let writing = true;
    const writes = (async () => {
      for (let i = 0; writing; i++) {
        await client
          .put(`/burst/${i % 50}`)
          .value(String(i))
          .exec();
        await sleep(20);
      }
    })();
    for (let i = 0; i < 6; i++) {
      await sleep(2_000);
      const res = await fetch(`${sidecar.url}/snapshot/full`, { method: 'POST' });
      expect(res.status, await res.text()).toBe(200);
    }
    writing = false;
    await writes;
    const live = await keyspaceOnceStored(client, sidecar.url);
    const log = await sidecar.log();
    await stopSidecar(sidecar);
    const entries = await listSnapshots(new LocalStore(storeDir));
    expect(entries.filter((e) => e.kind === 'Full').length).toBeGreaterThanOrEqual(6);
    expect(deltaGaps(entries)).toEqual([]);
    expect(log).not.toMatch(/does not continue the (store's )?chain/);
    // verify says so too: no full snapshot it keeps stops short of the newest revision.
    const verified = await runProgram('etcd-copy-backups', [
      'verify',
      '--store',
      `file://${storeDir}`,
      '--output',
      'json',
    ]);
    expect(verified.code, verified.stderr).toBe(0);
    expect(JSON.parse(verified.stdout).fallbackGaps).toEqual([]);
    expect((await restoreAndFingerprint(`file://${storeDir}`, dir, 'newest')).fingerprint).toEqual(live);
    // From the oldest full snapshot through every later one: the revision midway restores.
    const mid = Math.floor(live.revision / 2);
    const restored = await restoreAndFingerprint(`file://${storeDir}`, dir, 'mid', ['--to-revision', String(mid)]);
    expect(restored.result.revision).toBe(mid);
  });

  it('etcd compacted past a fork before the sidecar starts: the abandoned snapshots are set aside all the same', async () => {
    const { dir, storeDir, m, beforeBadWrites } = await storedBadWrites('fork-compacted');
    const abandoned = (await storeObjects(storeDir)).chain.filter((n) => Number(n.split('-')[2]) > beforeBadWrites);

    // Fewer new writes than bad ones: etcd stays below the store's head. Then it compacts at its head, as druid's
    // periodic auto-compaction does within minutes.
    await restoreMember(m, `file://${storeDir}`, ['--to-revision', String(beforeBadWrites)]);
    const again = await m.start();
    await putMany(again, '/new/', 5);
    const compacted = await etcdRevision(again);
    await compactHistory({ endpoints: [m.endpoint] }, compacted, { timeoutMs: 30_000 });

    const sidecar = await sidecarOn(m, `file://${storeDir}`, join(dir, 'sidecar-2'));
    await putMany(again, '/after/', 10);
    const live = await keyspaceOnceStored(again, sidecar.url);
    await stopSidecar(sidecar);
    const log = await sidecar.log(); // whole once it stopped
    expect(log).toMatch(/etcd's history left the store's/);
    expect(log).not.toMatch(/cannot tell whether etcd continues/);
    // the revisions after the fork that etcd compacted are in no delta, and the log says which and why
    expect(log).toContain(
      `the deltas go on after the full snapshot","neededRevision":${beforeBadWrites + 1},"compactRevision":${compacted}`,
    );
    const { chain, forks } = await storeObjects(storeDir);
    expect(forks.sort()).toEqual(expect.arrayContaining(abandoned));
    expect(chain.filter((n) => abandoned.includes(n))).toEqual([]);
    expect((await restoreAndFingerprint(`file://${storeDir}`, dir, 'newest')).fingerprint).toEqual(live);
    const atFork = await restoreAndFingerprint(`file://${storeDir}`, dir, 'at-fork', [
      '--to-revision',
      String(beforeBadWrites),
    ]);
    expect(atFork.fingerprint.keys).toBe(20);
  });

  it('a restore without --fork inside a delta etcd then compacted, above a delta that agrees: the revisions inside tell the fork', async () => {
    const dir = at('untold-above-agreement');
    const storeDir = join(dir, 'store');
    const { member: m, client } = await member(join(dir, 'etcd'));
    // One delta a minute: each sidecar's writes go into one delta as it stops, whatever the machine's load.
    const slow = ['--delta-snapshot-period', '60s'];
    const first = await sidecarOn(m, `file://${storeDir}`, join(dir, 'sidecar-1'), slow);
    await waitFor('the start-up full snapshot', () => snapshotsReach(first.url, 1));
    await putMany(client, '/early/', 5);
    await stopSidecar(first);
    // The kept writes and the bad ones together in the next delta.
    const writing = await sidecarOn(m, `file://${storeDir}`, join(dir, 'sidecar-1b'), slow);
    await putMany(client, '/keep/', 20);
    const beforeBadWrites = await etcdRevision(client);
    await client.delete().prefix('/keep/').exec();
    await putMany(client, '/bad/', 30);
    await waitFor('the sidecar taking snapshots', async () => /this sidecar leads/.test(await writing.log()));
    await stopSidecar(writing);
    await m.stop();
    const straddling = (await listSnapshots(new LocalStore(storeDir))).filter(
      (e) => e.startRevision <= beforeBadWrites && e.lastRevision > beforeBadWrites,
    );
    expect(straddling.map((e) => e.kind)).toEqual(['Incr']);

    // The new history writes past the store's head and etcd compacts there: the straddling delta's last revision
    // (a /bad/ key the new history never wrote) tells nothing, the delta below it agrees.
    await restoreMember(m, `file://${storeDir}`, ['--to-revision', String(beforeBadWrites)]);
    const again = await m.start();
    await putMany(again, '/new/', 40);
    await compactHistory({ endpoints: [m.endpoint] }, await etcdRevision(again), { timeoutMs: 30_000 });
    const second = await sidecarOn(m, `file://${storeDir}`, join(dir, 'sidecar-2'));
    await putMany(again, '/after/', 5);
    const live = await keyspaceOnceStored(again, second.url);
    await stopSidecar(second);
    expect(await second.log()).toMatch(/etcd's history left the store's/);
    const { chain, forks } = await storeObjects(storeDir);
    expect(forks).toContain(straddling[0].name.split('/').pop());
    expect((await restoreAndFingerprint(`file://${storeDir}`, dir, 'newest')).fingerprint).toEqual(live);
    // The straddling delta's shared revisions stay in the chain: the store restores the fork's state.
    expect(chain.some((n) => Number(n.split('-')[2]) === beforeBadWrites)).toBe(true);
    const atFork = await restoreAndFingerprint(`file://${storeDir}`, dir, 'at-fork', [
      '--to-revision',
      String(beforeBadWrites),
    ]);
    expect(atFork.fingerprint.keys).toBe(25);
  });

  it('a refusal holds when etcd then compacts what proved it: the sidecar never goes on with a history it found to differ', async () => {
    const { dir, storeDir, m, beforeBadWrites } = await storedBadWrites('refusal-holds');
    const before = (await storeObjects(storeDir)).chain;

    // Restored without --fork; the new history deletes and writes every key the store's snapshots end with again, and etcd
    // compacts between the fork and the store's head: a difference is proven, the revision both share is not.
    await restoreMember(m, `file://${storeDir}`, ['--to-revision', String(beforeBadWrites)]);
    const again = await m.start();
    await again.delete().prefix('/keep/').exec();
    await putMany(again, '/keep/', 20);
    await putMany(again, '/bad/', 30);
    await putMany(again, '/bad/', 30);
    await compactHistory({ endpoints: [m.endpoint] }, beforeBadWrites + 5, { timeoutMs: 30_000 });
    const sidecar = await sidecarOn(m, `file://${storeDir}`, join(dir, 'sidecar-2'));
    await waitFor('the refusal', async () => (await metric(sidecar.url, 'etcd_snapshot_history_refused')) === 1);
    // etcd compacts past all the store holds: nothing is left that could tell the two histories apart
    await compactHistory({ endpoints: [m.endpoint] }, await etcdRevision(again), { timeoutMs: 30_000 });
    await putMany(again, '/later/', 5);
    await sleep(5_000); // the refused sidecar looks again after 1 s, 2 s, …
    expect(await metric(sidecar.url, 'etcd_snapshot_history_refused')).toBe(1);
    await stopSidecar(sidecar);
    const log = await sidecar.log();
    expect(log).toMatch(/refusing to take snapshots/);
    expect(log).not.toMatch(/cannot tell whether etcd continues|taking snapshots: this sidecar leads/);
    expect((await storeObjects(storeDir)).chain).toEqual(before);
  });

  it('etcd-compact and a set-aside exclude each other: no compacted full snapshot of the abandoned history stays in the chain', async () => {
    const dir = at('compact-set-aside');
    const storeDir = join(dir, 'store');
    const storeUrl = `file://${storeDir}`;
    const { member: m, client } = await member(join(dir, 'etcd'));
    const sidecar = await sidecarOn(m, storeUrl, join(dir, 'sidecar'));
    await waitFor('the start-up full snapshot', () => snapshotsReach(sidecar.url, 1));
    await putMany(client, '/keep/', 20);
    const beforeBadWrites = (await keyspaceOnceStored(client, sidecar.url)).revision;
    const writer = startWriter(client, { prefix: '/bad/' });
    await sleep(3_000);
    await writer.stop();
    const oldHead = (await keyspaceOnceStored(client, sidecar.url)).revision;
    await stopSidecar(sidecar);
    await m.stop();

    // etcd-compact folds the old chain while the member is restored to before the bad writes with --fork.
    await mkdir(at('compact-scratch'));
    const compaction = startProgram('etcd-compact', ['--store', storeUrl, '--temp-dir', at('compact-scratch')]);
    let stderr = '';
    compaction.stderr?.on('data', (chunk) => {
      stderr += chunk;
    });
    let code: number | null | undefined;
    const exited = new Promise<number | null>((resolve) => compaction.once('exit', resolve)).then((c) => {
      code = c;
      return c;
    });
    while ((await readdir(join(storeDir, 'locks')).catch(() => [])).length === 0) {
      expect(code, `etcd-compact ended before it took the store lock: ${stderr}`).toBeUndefined();
      await sleep(50);
    }
    const restored = await restoreMember(m, storeUrl, ['--to-revision', String(beforeBadWrites), '--fork']);
    expect(restored.revision).toBe(beforeBadWrites);
    expect(await exited, stderr).toBe(0);

    const entries = await listSnapshots(new LocalStore(storeDir));
    expect(entries.filter((e) => e.lastRevision > beforeBadWrites).map((e) => e.name)).toEqual([]);
    const { forks } = await storeObjects(storeDir);
    const folded = forks.find((n) => n.startsWith(`Full-00000000-${String(oldHead).padStart(8, '0')}`));
    expect(folded, `forks: ${forks.join(', ')}`).toBeDefined();
    // The compacted full snapshot records its revision's digest, as every full snapshot does.
    const forkFolder = (await readdir(join(storeDir, 'forks')))[0];
    const stat = await new LocalStore(storeDir).stat(`forks/${forkFolder}/${folded}`);
    expect(stat?.metadata[METADATA_REVISION_DIGEST]).toMatch(/^[0-9a-f]{64}$/);
  });
});
