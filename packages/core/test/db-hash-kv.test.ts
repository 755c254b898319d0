import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startCluster, type TestCluster, writeWorkload } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compactHistory, memberHashKV } from '../src/etcd/etcd-maintenance.js';
import { dbHashKV } from '../src/validation/db-hash-kv.js';

const run = promisify(execFile);

/**
 * etcd's HashKV computed from a db file (db-hash-kv.ts) against etcd's own answer: a snapshot taken before any
 * compaction holds the whole history, and hashed as compacted where the live member was compacted since, at
 * every revision the member still has, it must give the member's hash. The history has overwrites, deletes,
 * keys deleted and created again, range deletes, txns, leases, a tombstone at a compaction revision, and at
 * the end no live key at all (where etcd hashes differently).
 */
describe('HashKV of a db file, against etcd', () => {
  let cluster: TestCluster;
  let dir: string;
  let snapshot: string;
  let last: number;
  const compactions: number[] = [];

  const revisionNow = async () => Number((await cluster.client().kv.range({ key: Buffer.from([0]) })).header.revision);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'db-hash-kv-'));
    cluster = await startCluster();
    const client = cluster.client();
    await writeWorkload(client, { keys: 300, seed: 3 });
    compactions.push(await revisionNow());
    for (let i = 0; i < 20; i++) await client.put('/hot').value(`v${i}`);
    await client.put('/gone').value('a');
    await client.delete().key('/gone');
    // a tombstone exactly at a compaction revision
    compactions.push(await revisionNow());
    await client.put('/gone').value('b');
    const lease = client.lease(3600, { autoKeepAlive: false });
    await lease.put('/leased').value('x');
    await client.delete().prefix('/data/0000001');
    compactions.push((await revisionNow()) - 3);
    await writeWorkload(client, { keys: 100, seed: 4, prefix: '/late/' });
    compactions.push(await revisionNow());
    await client.put('/hot').value('last');
    last = await revisionNow();
    snapshot = join(dir, 'snapshot.db');
    await run('etcdctl', ['--endpoints', cluster.endpoints[0], 'snapshot', 'save', snapshot]);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('equals etcd at every revision it still has, before and after each compaction', async () => {
    const conn = { endpoints: cluster.endpoints };
    let compacted = 0;
    for (const compaction of [0, ...compactions]) {
      if (compaction > 0) await compactHistory(conn, compaction);
      compacted = compaction;
      // etcd 3.5 answers for the compaction's own revision too, from the hash it kept while compacting, taken as
      // compacted at the compaction before (its answer says which); 3.4 calls that revision compacted.
      const revisions = [compacted, compacted + 1, compacted + 2, Math.floor((compacted + last) / 2), last];
      for (const revision of revisions.filter((r) => r >= 1 && r <= last)) {
        const live = await memberHashKV(conn, revision).catch((err) => {
          if (revision === compacted && err.reason === 'compacted') return undefined;
          throw err;
        });
        if (!live) continue;
        expect(live.compactRevision).toBeLessThanOrEqual(compacted);
        const mine = dbHashKV(snapshot, { revision, compactRevision: live.compactRevision, tmpDir: dir });
        expect({ revision, compaction, hash: mine.hash }).toEqual({ revision, compaction, hash: live.hash });
      }
    }
  }, 120_000);

  it('equals etcd with its key index in sorted runs on disk', async () => {
    const conn = { endpoints: cluster.endpoints };
    const live = await memberHashKV(conn, last);
    const mine = dbHashKV(snapshot, {
      revision: last,
      compactRevision: live.compactRevision,
      tmpDir: dir,
      memoryBudget: 2000,
    });
    expect(mine.hash).toBe(live.hash);
  });

  it('equals etcd when no key is live at the revision hashed', async () => {
    const client = cluster.client();
    await client.delete().all();
    const emptied = await revisionNow();
    const file = join(dir, 'emptied.db');
    await run('etcdctl', ['--endpoints', cluster.endpoints[0], 'snapshot', 'save', file]);
    const conn = { endpoints: cluster.endpoints };
    const live = await memberHashKV(conn, emptied);
    const mine = dbHashKV(file, { revision: emptied, compactRevision: live.compactRevision, tmpDir: dir });
    expect(mine.hash).toBe(live.hash);
  });

  it('says why etcd cannot hash a revision', async () => {
    const conn = { endpoints: cluster.endpoints };
    await expect(memberHashKV(conn, 1)).rejects.toMatchObject({ reason: 'compacted' });
    await expect(memberHashKV(conn, (await revisionNow()) + 10)).rejects.toMatchObject({ reason: 'future' });
    expect(() => dbHashKV(snapshot, { revision: last + 1, compactRevision: 0, tmpDir: dir })).toThrow(
      /holds revisions up to/,
    );
  });
});
