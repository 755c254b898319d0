import { cp, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type CatalogEntry,
  compactHistory,
  compressor,
  type DeltaEvent,
  encodeDelta,
  fetchDelta,
  freePort,
  LocalStore,
  listSnapshots,
  readDeltaEvents,
  takeFullSnapshot,
} from '@etcd-steward/core';
import {
  makeTestCertificates,
  startCluster,
  storeDeltas,
  type TestCluster,
  watchEvents,
  writeWorkload,
} from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ebrLocalListing } from './ebr-local-listing.js';
import { runProgram } from './run-program.js';
import { startKubeApiServer } from './servers/kube-apiserver.js';
import {
  etcdRevision,
  firstDelta,
  keyspaceOnceStored,
  metric,
  type SidecarProcess,
  startSidecar,
  waitFor,
} from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('proof-');

/** A stored delta's events, changed by `change`, stored again under its name (a fault the proof must find). */
async function rewriteDelta(
  store: LocalStore,
  entry: CatalogEntry,
  change: (events: DeltaEvent[]) => DeltaEvent[],
): Promise<void> {
  const file = at(`rewrite-${Date.now()}.delta`);
  await fetchDelta(store, entry, file);
  const events: DeltaEvent[] = [];
  for await (const e of readDeltaEvents(file, entry, entry.name)) events.push(e);
  const policy = entry.name.includes('.zst') ? 'zstd' : entry.name.includes('.gz') ? 'gzip' : 'none';
  await store.put(entry.name, encodeDelta(change(events)).pipe(compressor(policy)));
}

/** The delta of the store's newest chain that holds `revision`. */
async function deltaHolding(store: LocalStore, revision: number): Promise<CatalogEntry> {
  const entries = await listSnapshots(store);
  const delta = entries.find((e) => e.kind === 'Incr' && e.startRevision <= revision && e.lastRevision >= revision);
  if (!delta) throw new Error(`no delta holds revision ${revision}`);
  return delta;
}

const verify = (storeDir: string, endpoints: string[], ...more: string[]) =>
  runProgram('etcd-copy-backups', [
    'verify',
    '--store',
    `file://${storeDir}`,
    '--against',
    endpoints.join(','),
    '--temp-dir',
    at(),
    ...more,
  ]);

/**
 * The proof against the live cluster (docs/proof.md), end to end: a sidecar's store after a mixed workload with
 * compactions by etcd between its snapshots proves, by etcd-copy-backups verify --against and etcd-restore
 * --verify-against; a delta with one row altered, one with an event dropped, and another cluster's store with
 * the same keys fail, naming the key; and a cluster compacted past the store's revision cannot prove it.
 */
describe('the backups proven against the live cluster', () => {
  let cluster: TestCluster;
  let sidecar: SidecarProcess | undefined;
  let txnRevision: number;
  let storeRevision: number;

  beforeAll(async () => {
    cluster = await startCluster();
    const client = cluster.client();
    sidecar = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: `file://${at('store')}`,
      dir: at('sidecar'),
    });
    const conn = { endpoints: cluster.endpoints };
    await writeWorkload(client, { keys: 300, seed: 1 });
    await firstDelta(sidecar.url);
    // etcd compacts before the next full snapshot, and again between it and the last delta
    await compactHistory(conn, (await etcdRevision(client)) - 50);
    await writeWorkload(client, { keys: 100, seed: 2, prefix: '/b/' });
    expect((await fetch(`${sidecar.url}/snapshot/full`, { method: 'POST' })).status).toBe(200);
    await writeWorkload(client, { keys: 100, seed: 3, prefix: '/c/' });
    await compactHistory(conn, (await etcdRevision(client)) - 20);
    const txn = await client.kv.txn({
      compare: [],
      success: ['/txn/a', '/txn/b', '/txn/c'].map((key) => ({
        request_put: { key: Buffer.from(key), value: Buffer.from(`${key}-value`) },
      })),
      failure: [],
    });
    txnRevision = Number(txn.header.revision);
    await client.put('/after').value('x');
    storeRevision = (await keyspaceOnceStored(client, sidecar.url)).revision;
    expect(await sidecar.stop()).toBe(0);
    sidecar = undefined;
  }, 180_000);

  afterAll(async () => {
    await sidecar?.kill();
    await cluster?.stop();
  });

  it("proves the sidecar's store: etcd-copy-backups verify --against", async () => {
    const result = await verify(at('store'), cluster.endpoints);
    expect(result.stderr).not.toMatch(/"level":"error"/);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`proven revision ${storeRevision} against 1 member`));
    const json = await verify(at('store'), cluster.endpoints, '--output', 'json');
    const report = JSON.parse(json.stdout);
    expect(report).toMatchObject({ outcome: 'proven', revision: storeRevision, proof: { verdict: 'proven' } });
    expect(report.proof.compactRevision).toBeGreaterThan(0);
    expect(report.proof.members[0].equal).toBe(true);
  }, 60_000);

  it('verify --against creates a --temp-dir that is not there yet, as the other programs do', async () => {
    const scratch = at('scratch-not-yet', 'drill');
    const args = ['verify', '--store', `file://${at('store')}`, '--against', cluster.endpoints.join(',')];
    const result = await runProgram('etcd-copy-backups', [...args, '--temp-dir', scratch]);
    expect(result.stderr).not.toMatch(/does not exist/);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`proven revision ${storeRevision}`));
    expect(await readdir(scratch)).toEqual([]); // its scratch restore removed, the folder left as asked for
    // a path that can never be a folder is still refused before any work
    const file = at('scratch-file');
    await writeFile(file, 'x');
    const refused = await runProgram('etcd-copy-backups', [...args, '--temp-dir', join(file, 'drill')]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--temp-dir .* cannot be created: .* is not a directory/);
  }, 60_000);

  it("the restore drill's record shows in the sidecar's metrics", async () => {
    // the drill as deploy/proof-cronjob.yaml runs it
    const drill = await verify(at('store'), cluster.endpoints, '--record', '--output', 'json');
    expect(drill.code).toBe(0);
    // the EtcdMember's BackupProven condition follows the record too
    await mkdir(at('certificates'), { recursive: true });
    const kube = await startKubeApiServer(await makeTestCertificates(at('certificates')));
    await kube.writeKubeconfig(at('kubeconfig'));
    const backupProven = () =>
      (
        kube.get('etcdmembers', 'shoot--dev', 'etcd-main-0')?.status as
          | { conditions?: { type: string; status: string; reason: string }[] }
          | undefined
      )?.conditions?.find((c) => c.type === 'BackupProven');
    const watcher = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: `file://${at('store')}`,
      dir: at('sidecar-metrics'),
      args: [
        '--proof-record-period',
        '1s',
        '--etcd-member-resource',
        '--k8s-heartbeat-duration',
        '1s',
        '--kubeconfig',
        at('kubeconfig'),
      ],
      env: { ...process.env, POD_NAME: 'etcd-main-0', POD_NAMESPACE: 'shoot--dev' },
    });
    try {
      await waitFor('BackupProven True on the EtcdMember', async () =>
        backupProven()?.status === 'True' ? true : undefined,
      );
      expect(backupProven()).toMatchObject({ reason: 'Proven' });
      await waitFor('the proven revision in the metrics', async () =>
        (await metric(watcher.url, 'etcd_snapshot_backup_proven_revision')) === storeRevision ? true : undefined,
      );
      const proven = await metric(watcher.url, 'etcd_snapshot_backup_proven_timestamp_seconds');
      expect(Math.abs((proven ?? 0) - Date.now() / 1000)).toBeLessThan(120);
      expect(await metric(watcher.url, 'etcd_snapshot_backup_proof_last_outcome', 'outcome="proven"')).toBe(1);
      expect(await metric(watcher.url, 'etcd_snapshot_backup_proof_failures_total', 'outcome="mismatch"')).toBe(0);
      // a drill that cannot prove: the sidecar counts it, and keeps the last proven revision
      const record = JSON.parse(await readFile(at('store', 'proofs', 'latest.json'), 'utf8'));
      await writeFile(
        at('store', 'proofs', 'latest.json'),
        JSON.stringify({ ...record, outcome: 'mismatch', failures: { mismatch: 1 } }),
      );
      await waitFor('the failure in the metrics', async () =>
        (await metric(watcher.url, 'etcd_snapshot_backup_proof_failures_total', 'outcome="mismatch"')) === 1
          ? true
          : undefined,
      );
      expect(await metric(watcher.url, 'etcd_snapshot_backup_proof_last_outcome', 'outcome="mismatch"')).toBe(1);
      expect(await metric(watcher.url, 'etcd_snapshot_backup_proven_revision')).toBe(storeRevision);
      await waitFor('BackupProven False on the EtcdMember', async () =>
        backupProven()?.status === 'False' ? true : undefined,
      );
      expect(backupProven()).toMatchObject({ reason: 'Mismatch' });
      await writeFile(at('store', 'proofs', 'latest.json'), JSON.stringify(record));
    } finally {
      expect(await watcher.stop()).toBe(0);
      await kube.stop();
    }
  }, 60_000);

  it('proves it as etcd-restore --verify-against restores it', async () => {
    const result = await runProgram('etcd-restore', [
      '--store',
      `file://${at('store')}`,
      '--data-dir',
      at('restored'),
      '--verify-against',
      // a member down: the proof stands on those that answer, and says which did not
      `${cluster.endpoints[0]},http://127.0.0.1:${await freePort()}`,
    ]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/proven revision \d+ against 1 member/);
    expect(result.stdout).toMatch(/http:\/\/127.0.0.1:\d+: did not answer/);
  }, 60_000);

  it('fails naming the key when one delta row was altered', async () => {
    await cp(at('store'), at('altered'), { recursive: true });
    const store = new LocalStore(at('altered'));
    await rewriteDelta(store, await deltaHolding(store, txnRevision), (events) =>
      events.map((e) =>
        e.modRevision === txnRevision && e.key.toString() === '/txn/b' ? { ...e, value: Buffer.from('tampered') } : e,
      ),
    );
    const result = await verify(at('altered'), cluster.endpoints);
    expect(result.code).toBe(4);
    expect(result.stdout).toMatch(/MISMATCH/);
    expect(result.stdout).toMatch(
      /first differing key \/txn\/b: cluster value "\/txn\/b-value".*backup value "tampered"/,
    );
    expect(result.stdout).toMatch(new RegExp(`first differing revision ${txnRevision}`));
  }, 60_000);

  it('fails naming the key when one event was dropped from a delta', async () => {
    await cp(at('store'), at('dropped'), { recursive: true });
    const store = new LocalStore(at('dropped'));
    await rewriteDelta(store, await deltaHolding(store, txnRevision), (events) =>
      events.filter((e) => !(e.modRevision === txnRevision && e.key.toString() === '/txn/b')),
    );
    const result = await verify(at('dropped'), cluster.endpoints);
    expect(result.code).toBe(4);
    expect(result.stdout).toMatch(/first differing key \/txn\/b: cluster value "\/txn\/b-value".*backup absent/);
  }, 60_000);

  it("fails naming a key when the store holds another cluster's history with the same keys", async () => {
    const other = await startCluster();
    try {
      const client = other.client();
      const store = new LocalStore(at('foreign'));
      await writeWorkload(client, { keys: 300, seed: 9 });
      const full = await takeFullSnapshot({
        connection: { endpoints: other.endpoints },
        store,
        compression: 'gzip',
        tempDir: at(),
      });
      // up to a revision the live cluster still has: past its last compaction, short of its head
      for (let i = 0; (await etcdRevision(client)) < storeRevision - 3; i++) {
        await client.put(`/data/${String(i % 300).padStart(8, '0')}`).value(`other-${i}`);
      }
      const last = await etcdRevision(client);
      const events = await watchEvents(client, full.revision + 1, last, () => new Date().toISOString());
      await storeDeltas(store, events, { startRevision: full.revision + 1 });
      expect(last).toBeLessThan(storeRevision);
      const result = await verify(at('foreign'), cluster.endpoints);
      expect(result.code).toBe(6);
      expect(result.stdout).toMatch(/FOREIGN .*another cluster's history/);
      // the same keys, written in another history: the first one in key order differs
      expect(result.stdout).toMatch(/first differing key \/(b|c|data)\/\d{8}: cluster value .*; backup (value|absent)/);
      expect(result.stdout).toMatch(/revisions compared since the compaction: \d+, the same in both: 0/);
    } finally {
      await other.stop();
    }
  }, 90_000);

  it('cannot prove a store the cluster has compacted past, and says so with its own exit code', async () => {
    const client = cluster.client();
    await client.put('/later').value('y');
    await compactHistory({ endpoints: cluster.endpoints }, await etcdRevision(client));
    const result = await verify(at('store'), cluster.endpoints, '--record');
    expect(result.code).toBe(5);
    expect(result.stdout).toMatch(/NOT PROVEN .*has compacted its history past the backup's revision/);
    expect(result.stdout).not.toMatch(/proven revision/);
    const record = JSON.parse(await readFile(at('store', 'proofs', 'latest.json'), 'utf8'));
    expect(record).toMatchObject({
      version: 1,
      outcome: 'unprovable',
      revision: storeRevision,
      failures: { unprovable: 1 },
    });
    // beside the snapshots, but none of them to ebr or to us
    expect((await ebrLocalListing(at('store'))).some((path) => path.startsWith('proofs'))).toBe(false);
    expect((await listSnapshots(new LocalStore(at('store')))).some((e) => e.name.startsWith('proofs'))).toBe(false);
  }, 60_000);
});
