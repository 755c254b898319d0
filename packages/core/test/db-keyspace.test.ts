import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkEtcdUnderTest, writeWorkload } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findEtcdBinaries } from '../src/etcd/etcd-binaries.js';
import { createEtcdClient } from '../src/etcd/etcd-client.js';
import { type KeyspaceFingerprint, keyspaceFingerprint } from '../src/etcd/keyspace-fingerprint.js';
import { EtcdProcess } from '../src/etcd/spawned-etcd.js';
import { dbKeyspace, KeyspaceReader } from '../src/validation/db-keyspace.js';
import { validateDataDir } from '../src/validation/validate-data-dir.js';

/**
 * The keyspace read from a db file without etcd must be what etcd serves from it: the same fingerprint at the
 * db's revision, and the same key count at an earlier one, on a db with overwrites, deletes, txns, leases and a
 * compaction, written and left by a real etcd.
 */
describe('dbKeyspace: the fingerprint of a db file equals the one etcd serves', () => {
  let dir: string;
  let served: KeyspaceFingerprint;
  let earlier: { revision: number; keys: number };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'db-keyspace-'));
    const binaries = await findEtcdBinaries();
    checkEtcdUnderTest(binaries);
    const etcd = await EtcdProcess.start({
      binaries,
      name: 'm0',
      dataDir: join(dir, 'data'),
      logFile: join(dir, 'etcd.log'),
    });
    const client = createEtcdClient({ endpoints: [etcd.clientUrl] });
    try {
      await etcd.waitHealthy();
      await writeWorkload(client, { keys: 1500, seed: 4 });
      // values larger than a page (overflow pages), one of them overwritten
      for (const [key, size] of [
        ['/big/a', 9000],
        ['/big/b', 20_000],
        ['/big/a', 13_000],
      ] as const)
        await client.put(key).value(Buffer.alloc(size, key.at(-1)));
      const at = Number((await client.kv.range({ key: Buffer.from([0]) })).header.revision);
      earlier = { revision: at, keys: (await keyspaceFingerprint(client, at)).keys };
      // history etcd drops at compaction, and keys deleted after it (tombstones newer than the compaction)
      await client.kv.compact({ revision: at, physical: true });
      await writeWorkload(client, { keys: 600, seed: 5, prefix: '/later/' });
      await client.delete().prefix('/data/0000001');
      await client.put('/data/00000002').value(Buffer.from([0, 255, 10]));
      served = await keyspaceFingerprint(client);
    } finally {
      client.close();
      await etcd.stop();
    }
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('with the key index in memory', () => {
    const read = dbKeyspace(join(dir, 'data/member/snap/db'), { tmpDir: dir, earlierRevision: earlier.revision });
    expect(served.keys).toBeGreaterThan(1500);
    expect(read.fingerprint).toEqual(served);
    expect(read.keysAtEarlier).toBe(earlier.keys);
  });

  it('with the key index spilled to sorted runs on disk (a budget of a few hundred keys), and the runs removed', async () => {
    const spillDir = join(dir, 'spill');
    await rm(spillDir, { recursive: true, force: true });
    await mkdir(spillDir);
    const read = dbKeyspace(join(dir, 'data/member/snap/db'), {
      tmpDir: spillDir,
      earlierRevision: earlier.revision,
      memoryBudget: 40_000,
    });
    expect(read.fingerprint).toEqual(served);
    expect(read.keysAtEarlier).toBe(earlier.keys);
    expect(await readdir(spillDir)).toEqual([]);
  });

  it('with the live rows taken a few at a time (each batch read through its own spans of pages)', () => {
    const read = dbKeyspace(join(dir, 'data/member/snap/db'), { tmpDir: dir, digestBatch: 7 });
    expect(read.fingerprint).toEqual(served);
  });

  it("from the leaves etcd-validate's full check reads (one read of the db for both)", async () => {
    const rows = new KeyspaceReader({ tmpDir: dir, earlierRevision: earlier.revision });
    let leaves = 0;
    try {
      const report = await validateDataDir({
        dataDir: join(dir, 'data'),
        mode: 'full',
        maxRevisionsAhead: Number.POSITIVE_INFINITY,
        readOnly: true,
        onLeaf: (bucket, id, page) => {
          if (bucket === 'key') leaves++;
          rows.addLeaf(bucket, id, page);
        },
      });
      expect(report.verdict).toBe('valid');
      expect(leaves).toBeGreaterThan(1);
      const read = rows.finish(join(dir, 'data/member/snap/db'));
      expect(read.fingerprint).toEqual(served);
      expect(read.keysAtEarlier).toBe(earlier.keys);
    } finally {
      rows.close();
    }
  });
});
