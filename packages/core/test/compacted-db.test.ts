import { closeSync, openSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, truncate } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  readRestored,
  startCluster,
  storeDeltas,
  type TestCluster,
  watchEvents,
  writeWorkload,
} from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { takeFullSnapshot } from '../src/backup/take-full-snapshot.js';
import { BboltReader } from '../src/bbolt/bbolt-file.js';
import { freePort } from '../src/common/free-port.js';
import { writeCompactedDb } from '../src/compaction/compacted-db.js';
import { compactInEtcd } from '../src/compaction/etcd-compaction.js';
import { findEtcdBinaries } from '../src/etcd/etcd-binaries.js';
import { type KeyspaceFingerprint, keyspaceFingerprint } from '../src/etcd/keyspace-fingerprint.js';
import { SNAPSHOT_TRAILER } from '../src/format/full-snapshot-check.js';
import { restore } from '../src/restore/restore.js';
import { LocalStore } from '../src/store/local.js';
import { dbKeyspace } from '../src/validation/db-keyspace.js';

/** Every bucket of a db or snapshot file (db plus trailer): its rows as "key=value" in hex, in file order. */
function dbRows(file: string): Map<string, string[]> {
  const fd = openSync(file, 'r');
  try {
    const reader = new BboltReader(fd);
    const rows = new Map<string, string[]>();
    for (const [name, bucket] of reader.buckets()) {
      rows.set(
        name,
        [...reader.elements(bucket)].map((r) => `${r.key.toString('hex')}=${r.value.toString('hex')}`),
      );
    }
    return rows;
  } finally {
    closeSync(fd);
  }
}

const hex = (s: string) => Buffer.from(s, 'latin1').toString('hex');

/** A `key` bucket row's key for main revision `main`, sub 0, in hex (a tombstone's adds 74, 't'). */
const revisionHex = (main: number) => `${main.toString(16).padStart(16, '0')}5f${'0'.repeat(16)}`;

/**
 * The compacted db written without etcd (compacted-db.ts) against its oracle, a real etcd's compaction at the
 * last revision and defragmentation of the same restored db (etcd-compaction.ts, ebr's way): the same rows in
 * every bucket, but etcd's own bookkeeping of the entries it applied; and etcd starts on the new db and
 * serves the chain's keyspace, compacted there. The chain has tombstones, keys deleted and re-created, leases,
 * many revisions of one key, values larger than a page, and a deletion as its last revision.
 */
describe('compacted db written without etcd, against a real etcd compacting the same restored db', () => {
  let cluster: TestCluster | undefined;
  let dir: string;
  let last: number;
  let restored: KeyspaceFingerprint;
  let member: { name: string; initialCluster: string; initialClusterToken: string; initialAdvertisePeerUrls: string };
  let peerPort: number;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'compacted-db-'));
    cluster = await startCluster();
    const client = cluster.client();
    const store = new LocalStore(join(dir, 'store'));
    await writeWorkload(client, { keys: 600, seed: 7 });
    const saved = await takeFullSnapshot({
      connection: { endpoints: cluster.endpoints },
      store,
      compression: 'gzip',
      tempDir: dir,
    });
    for (let i = 0; i < 40; i++) await client.put('/hot').value(`v${i}`);
    // values on overflow pages, an old one and its successor
    await client.put('/big').value(Buffer.alloc(20_000, 'a'));
    await client.put('/big').value(Buffer.alloc(30_000, 'b'));
    await client.put('/gone').value('a');
    await client.delete().key('/gone');
    await client.put('/gone').value('b');
    await client.delete().key('/gone');
    await client.put('/again').value('a');
    await client.delete().key('/again');
    await client.put('/again').value('b');
    const lease = client.lease(3600, { autoKeepAlive: false });
    await lease.put('/leased/1').value('x');
    await lease.put('/leased/2').value('y');
    await client.put('/leased/1').value('unleased');
    const revoked = client.lease(3600, { autoKeepAlive: false });
    await revoked.put('/leased/3').value('z');
    await revoked.revoke();
    await client.delete().prefix('/data/0000001');
    await writeWorkload(client, { keys: 200, seed: 8, prefix: '/late/' });
    await client.put('/last').value('x');
    await client.delete().key('/last');
    last = Number((await client.kv.range({ key: Buffer.from([0]) })).header.revision);
    const events = await watchEvents(client, saved.revision + 1, last, () => new Date().toISOString());
    await storeDeltas(store, events, {
      startRevision: saved.revision + 1,
      cuts: [saved.revision + 30],
      compression: 'gzip',
    });
    await cluster.stop();
    cluster = undefined;

    peerPort = await freePort();
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    member = {
      name: 'c0',
      initialCluster: `c0=${peerUrl}`,
      initialClusterToken: 'compacted-db-test',
      initialAdvertisePeerUrls: peerUrl,
    };
    const result = await restore({
      store: `file://${join(dir, 'store')}`,
      dataDir: join(dir, 'data'),
      member,
      toRevision: last,
    });
    restored = result.fingerprint!;
    await cp(join(dir, 'data'), join(dir, 'data-etcd'), { recursive: true });
    await mkdir(join(dir, 'etcd-scratch'));
    await compactInEtcd({
      binaries: await findEtcdBinaries(),
      dataDir: join(dir, 'data-etcd'),
      member,
      peerPort,
      scratch: join(dir, 'etcd-scratch'),
      revision: last,
      defragment: true,
      defragTimeoutMs: 120_000,
      snapshotTimeoutMs: 120_000,
      file: join(dir, 'by-etcd.db'),
    });
    await writeCompactedDb(join(dir, 'data/member/snap/db'), join(dir, 'direct.db'), { revision: last, tmpDir: dir });
  }, 240_000);

  afterAll(async () => {
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('holds the rows etcd keeps, bucket by bucket; only what the private etcd applied as a member differs', () => {
    const byEtcd = dbRows(join(dir, 'by-etcd.db'));
    const direct = dbRows(join(dir, 'direct.db'));
    expect([...direct.keys()].sort()).toEqual([...byEtcd.keys()].sort());
    // The deletion of /last is the last revision: etcd keeps that tombstone since 3.5.16 (etcd#18274), as
    // the direct writer does; 3.4.23 drops it.
    const lastTombstone = direct.get('key')!.filter((r) => r.startsWith(revisionHex(last)));
    expect(lastTombstone).toEqual([`${revisionHex(last)}74=${hex('\n\x05/last')}`]);
    for (const [name, rows] of byEtcd) {
      // a started etcd records itself, the member its WAL names, where the snapshot has the source cluster's
      // members (which a restore replaces in any case)
      if (name === 'meta' || name === 'members' || name === 'members_removed') continue;
      const expected = name === 'key' && !rows.includes(lastTombstone[0]) ? [...rows, ...lastTombstone] : rows;
      expect(direct.get(name), `bucket ${name}`).toEqual(expected);
    }
    // meta: the compaction marks equal; what else differs is the raft bookkeeping of the private etcd
    const bookkeeping = ['consistent_index', 'term', 'confState'].map(hex);
    const meta = (rows: string[]) => rows.filter((r) => !bookkeeping.includes(r.split('=')[0]));
    expect(meta(direct.get('meta')!)).toEqual(meta(byEtcd.get('meta')!));
    expect(direct.get('meta')!.filter((r) => r.startsWith(hex('finishedCompactRev')))).toHaveLength(1);
    // history is gone, tombstones with it: one row per live key, and the tombstone at the last revision
    expect(direct.get('key')).toHaveLength(restored.keys + 1);
    expect(direct.get('lease')!.length).toBeGreaterThan(0);
  });

  it('holds the chain keyspace, read from the file', () => {
    expect(dbKeyspace(join(dir, 'direct.db'), { tmpDir: dir }).fingerprint).toEqual(restored);
    expect(restored.revision).toBe(last);
  });

  it('with the key index spilled to sorted runs (a budget of a few keys): the same file', async () => {
    await mkdir(join(dir, 'spill'));
    await writeCompactedDb(join(dir, 'data/member/snap/db'), join(dir, 'spilled.db'), {
      revision: last,
      tmpDir: join(dir, 'spill'),
      indexBudget: 4_000,
    });
    expect((await readFile(join(dir, 'spilled.db'))).equals(await readFile(join(dir, 'direct.db')))).toBe(true);
  });

  it('etcd starts on it and serves the chain keyspace at the last revision, compacted there', async () => {
    await cp(join(dir, 'data'), join(dir, 'data-direct'), { recursive: true });
    const db = join(dir, 'data-direct/member/snap/db');
    await cp(join(dir, 'direct.db'), db);
    const { size } = await import('node:fs/promises').then((fs) => fs.stat(db));
    await truncate(db, size - SNAPSHOT_TRAILER);
    const [served] = await readRestored(
      [{ name: member.name, dataDir: join(dir, 'data-direct'), peerPort }],
      { initialCluster: member.initialCluster, clusterToken: member.initialClusterToken },
      async (client) => ({
        fingerprint: await keyspaceFingerprint(client),
        older: await client.kv.range({ key: Buffer.from('/hot'), revision: String(last - 1) }).then(
          () => 'served',
          (err: Error) => err.message,
        ),
        leased: (await client.get('/leased/2').exec()).kvs[0]?.lease,
      }),
    );
    expect(served.fingerprint).toEqual(restored);
    expect(served.older).toMatch(/compacted/);
    expect(served.leased).not.toBe('0');
  });
});
