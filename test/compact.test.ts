import { mkdir, readdir } from 'node:fs/promises';
import {
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  LocalStore,
  listSnapshots,
  memberStatus,
  parseSnapshotName,
  takeFullSnapshot,
} from '@etcd-steward/core';
import { startCluster, storeDeltas, type TestCluster, watchEvents, writeWorkload } from '@etcd-steward/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { restoreAndFingerprint } from './restore-program.js';
import { runProgram } from './run-program.js';
import { tempDir } from './temp-dir.js';

const WRITES = 50_000;

/**
 * About `WRITES` revisions through etcd, many at once: puts over 5,000 keys, deletes, and txns of three puts. Which
 * write gets which revision is etcd's business; what counts is that etcd itself keeps the outcome.
 */
async function writeHistory(client: ReturnType<TestCluster['client']>): Promise<void> {
  const keys = 5000;
  const key = (n: number) => Buffer.from(`/history/${String((n * 7919) % keys).padStart(6, '0')}`);
  const value = (n: number) => Buffer.from(`${n}:${'x'.repeat(100)}`);
  let next = 0;
  const write = async (n: number) => {
    if (n % 10 === 9) {
      const success = [0, 1, 2].map((j) => ({ request_put: { key: key(n + j), value: value(n) } }));
      await client.kv.txn({ compare: [], success, failure: [] });
    } else if (n % 10 === 7) {
      // A key the txns write (key(n) itself is one no other write touches).
      await client.kv.deleteRange({ key: key(n + 2) });
    } else {
      await client.kv.put({ key: key(n), value: value(n) });
    }
  };
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < WRITES) await write(next++);
    }),
  );
}

/**
 * A long chain: a full snapshot of a real etcd, then about 50,000 revisions of writes to it, stored as deltas
 * from etcd's own watch. The oracle is that etcd: the compacted full snapshot alone must restore its revision and
 * keyspace, as read from an etcd started on the restored data dir.
 */
describe('etcd-compact of a chain of about 50,000 delta revisions', () => {
  const at = tempDir('compact-');
  let storeUrl: string;
  let store: LocalStore;
  let full: string;
  let lastRevision: number;
  let revisions: number;
  let source: KeyspaceFingerprint;
  let before: string[];

  beforeAll(async () => {
    const cluster = await startCluster();
    try {
      await writeWorkload(cluster.client(), { keys: 800 });
      store = new LocalStore(at('store'));
      storeUrl = `file://${at('store')}`;
      const saved = await takeFullSnapshot({
        connection: { endpoints: cluster.endpoints },
        store,
        compression: 'gzip',
        tempDir: at(),
      });
      full = saved.ref.name;
      const client = cluster.client();
      await writeHistory(client);
      lastRevision = (await memberStatus({ endpoints: cluster.endpoints })).revision;
      revisions = lastRevision - saved.revision;
      expect(revisions).toBeGreaterThan(WRITES * 0.9);
      source = await keyspaceFingerprint(client);
      expect(source.revision).toBe(lastRevision);
      const events = await watchEvents(client, saved.revision + 1, lastRevision);
      const step = Math.floor(revisions / 10);
      const cuts = Array.from({ length: 9 }, (_, i) => saved.revision + 1 + (i + 1) * step);
      await storeDeltas(store, events, { startRevision: saved.revision + 1, cuts, compression: 'gzip' });
    } finally {
      await cluster.stop();
    }
    before = (await listSnapshots(store)).map((e) => e.name);
  });

  const restoreFrom = (snapshot: string, name: string) =>
    restoreAndFingerprint(storeUrl, at(), name, ['--snapshot', snapshot]);

  it('--dry-run prints what it would fold and changes nothing', async () => {
    const res = await runProgram('etcd-compact', ['--store', storeUrl, '--work-dir', at(), '--dry-run']);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain(`plan: fold 11 object(s) of ${storeUrl}`);
    expect(res.stdout).toContain(
      `into one full snapshot at revision ${lastRevision} (${revisions} revision(s) folded)`,
    );
    expect(res.stdout).toContain(full);
    const json = await runProgram('etcd-compact', ['--store', storeUrl, '--dry-run', '--output', 'json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ revision: lastRevision, revisions, final: false });
    expect(JSON.parse(json.stdout).objects).toHaveLength(11);
    expect((await listSnapshots(store)).map((e) => e.name)).toEqual(before);
  });

  it('folds the chain into one full snapshot that alone restores the same revision and keyspace', async () => {
    const work = at('work');
    await mkdir(work);
    const res = await runProgram('etcd-compact', ['--store', storeUrl, '--work-dir', work, '--output', 'json']);
    expect(res.code, res.stderr).toBe(0);
    const result = JSON.parse(res.stdout);
    expect(result).toMatchObject({
      revision: lastRevision,
      revisionsFolded: revisions,
      final: false,
      objects: before,
    });
    expect(result.name).toMatch(new RegExp(`^v2/Full-00000000-0*${lastRevision}-\\d+\\.zst$`));
    expect(result.snapshotBytes).toBeGreaterThan(0);
    expect(result.peakRssBytes).toBeGreaterThan(0);
    // progress on the way (JSON lines when not a terminal), the scratch folder gone at the end
    expect(res.stderr).toMatch(/"level":"progress","msg":"replay"/);
    expect(res.stderr).toMatch(/"msg":"compacting the history","revision":\d+/);
    expect(res.stderr).toMatch(/"level":"progress","msg":"compacting","stage":"indexing the keys"/);
    expect(await readdir(work)).toEqual([]);
    // one object added, none changed or removed
    const after = (await listSnapshots(store)).map((e) => e.name);
    expect(after.filter((n) => !before.includes(n))).toEqual([result.name]);
    expect(after).toEqual(expect.arrayContaining(before));
    expect(parseSnapshotName(result.name)).toMatchObject({ kind: 'Full', startRevision: 0, lastRevision });

    const fromChain = await restoreFrom(full, 'from-chain');
    const fromCompacted = await restoreFrom(result.name, 'from-compacted');
    expect(fromChain.result).toMatchObject({ revision: lastRevision, snapshot: full });
    expect(fromChain.result.deltas).toHaveLength(10);
    expect(fromCompacted.result).toMatchObject({ revision: lastRevision, snapshot: result.name, deltas: [] });
    // What the etcd that took the writes holds: its revision, and every key with its value and revisions.
    expect(fromCompacted.fingerprint).toEqual(source);
    expect(fromChain.fingerprint).toEqual(source);
  });

  it('has nothing to fold once the newest full snapshot is the newest revision: exit 0, one line', async () => {
    const res = await runProgram('etcd-compact', ['--store', storeUrl, '--work-dir', at()]);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout.trim().split('\n')).toHaveLength(1);
    expect(res.stdout).toMatch(
      /^nothing to fold in .*: the newest full snapshot v2\/Full-00000000-\d+-\d+\.zst is at revision \d+ and no delta follows it\n$/,
    );
  });
});
