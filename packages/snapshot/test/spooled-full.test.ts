import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { decompressor, FullSnapshotCheck, silentLogger } from '@etcd-steward/core';
import { Spool, SpoolTooSmallError, spoolFullSnapshot } from '@etcd-steward/snapshot';
import { startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest';

let cluster: TestCluster;
let dir: string;

beforeAll(async () => {
  cluster = await startCluster();
  const client = cluster.client();
  for (let i = 0; i < 50; i++) await client.put(`/k/${i}`).value('v'.repeat(100));
});

afterAll(() => cluster?.stop());

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spooled-full-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const take = (spool: Spool) =>
  spoolFullSnapshot({
    connection: { endpoints: cluster.endpoints },
    spool,
    compression: 'zstd',
    tempDir: dir,
    logger: silentLogger,
    signal: new AbortController().signal,
  });

it('takes a verified full snapshot into the spool, named for its revision, that survives a reopen', async () => {
  const spool = await Spool.open(join(dir, 'spool'), 1 << 30);
  const full = await take(spool);
  expect(full).toMatchObject({ startRevision: 0, lastRevision: 51 });
  expect(full.name).toMatch(/^v2\/Full-00000000-00000051-\d+\.zst$/);
  expect(full.etcdVersion).toMatch(/^3\./);
  spool.close();

  const again = await Spool.open(join(dir, 'spool'), 1 << 30);
  expect(again.list()).toEqual([full]);
  const check = new FullSnapshotCheck('the spooled snapshot');
  await pipeline(again.read(full), decompressor('.zst'), check, async (source) => {
    for await (const _ of source);
  });
  expect(check.facts().revision).toBe(51);
  again.close();
});

it('keeps nothing when the snapshot does not fit under --spool-max-bytes', async () => {
  const spool = await Spool.open(join(dir, 'spool'), 1024);
  await expect(take(spool)).rejects.toThrow(SpoolTooSmallError);
  await expect(take(spool)).rejects.toThrow(/does not fit in the spool .*raise --spool-max-bytes/);
  expect(spool.depth).toBe(0);
  expect(await readdir(join(dir, 'spool', 'deltas'))).toEqual([]);
  spool.close();
});
