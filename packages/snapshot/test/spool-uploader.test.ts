import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  compressor,
  LocalStore,
  listSnapshots,
  METADATA_DB_SIZE,
  METADATA_DECOMPRESSED_SIZE,
  type SnapStore,
  silentLogger,
  snapshotName,
} from '@etcd-steward/core';
import { headsOf, Serial, SnapshotMetrics, Spool, SpoolUploader } from '@etcd-steward/snapshot';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, expect, it } from 'vitest';

let dir: string;
let spool: Spool;
let uploader: SpoolUploader | undefined;
let terms: AbortController;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spool-uploader-'));
  spool = await Spool.open(join(dir, 'spool'), 1 << 20);
  terms = new AbortController();
});

afterEach(async () => {
  terms.abort();
  uploader?.stop();
  spool.close();
  await rm(dir, { recursive: true, force: true });
});

const name = (kind: 'Full' | 'Incr', start: number, last: number) =>
  snapshotName({
    kind,
    startRevision: start,
    lastRevision: last,
    createdAt: 1795313340,
    compression: '.zst',
    final: false,
  });

const spoolDelta = (start: number, last: number) =>
  spool.add(
    { name: name('Incr', start, last), startRevision: start, lastRevision: last, oldestEventAt: Date.now() },
    Readable.from([Buffer.from(`${start}-${last}`)]),
  );

/** An uploader over `store`, and the resyncs it asked for. */
function uploaderFor(
  store: SnapStore,
  backfill: (from: number, through: number) => Promise<string | undefined> = async () => undefined,
) {
  const resyncs: number[] = [];
  uploader = new SpoolUploader({
    store,
    spool,
    serial: new Serial(),
    deltaUploadTimeoutMs: 10_000,
    metrics: new SnapshotMetrics(new Registry(), () => undefined),
    logger: silentLogger,
    signal: terms.signal,
    storeHeads: async () => headsOf(await listSnapshots(store)),
    resync: async () => {
      resyncs.push(spool.depth);
    },
    onFullStored: () => {},
    prepare: async () => {},
    onRefused: () => {},
    backfill,
  });
  return { uploader, resyncs };
}

async function storeWithFullAt(revision: number): Promise<LocalStore> {
  const store = new LocalStore(join(dir, 'store'));
  await store.put(name('Full', 0, revision), Readable.from([Buffer.from('full')]));
  return store;
}

const stored = async (store: SnapStore) => (await listSnapshots(store)).map((e) => e.name);

it('uploads the spool in order, and drops what the store already holds instead of uploading it again', async () => {
  const store = await storeWithFullAt(100);
  await spoolDelta(91, 100);
  await spoolDelta(101, 110);
  await spoolDelta(111, 120);
  const { uploader, resyncs } = uploaderFor(store);
  await uploader.drain();
  expect(await stored(store)).toEqual([name('Full', 0, 100), name('Incr', 101, 110), name('Incr', 111, 120)]);
  expect(spool.depth).toBe(0);
  expect(resyncs).toEqual([]);
});

it('uploads the deltas that continue the chain of deltas through a newer full snapshot', async () => {
  const store = new LocalStore(join(dir, 'store'));
  await store.put(name('Incr', 91, 100), Readable.from([Buffer.from('delta')]));
  await store.put(name('Full', 0, 150), Readable.from([Buffer.from('full')]));
  await spoolDelta(101, 140);
  await spoolDelta(141, 160);
  await spoolDelta(161, 170);
  const { uploader, resyncs } = uploaderFor(store);
  await uploader.drain();
  expect(await stored(store)).toEqual([
    name('Incr', 91, 100),
    name('Incr', 101, 140),
    name('Full', 0, 150),
    name('Incr', 141, 160),
    name('Incr', 161, 170),
  ]);
  expect(resyncs).toEqual([]);
});

it('uploads only up to the given spooled delta (what a full snapshot waits for)', async () => {
  const store = await storeWithFullAt(100);
  const first = await spoolDelta(101, 110);
  await spoolDelta(111, 120);
  const { uploader } = uploaderFor(store);
  await uploader.drain(first.id);
  expect(await stored(store)).toEqual([name('Full', 0, 100), name('Incr', 101, 110)]);
  expect(spool.list().map((d) => d.startRevision)).toEqual([111]);
});

it('uploads what the spool holds as it starts, not what is spooled while it runs: a queued full snapshot gets its turn', async () => {
  const store = await storeWithFullAt(100);
  await spoolDelta(101, 110);
  await spoolDelta(111, 120);
  // a store whose every upload takes as long as the writes need to spool the next delta
  let next = 121;
  const chased: SnapStore = Object.create(store, {
    put: {
      value: async (...args: Parameters<SnapStore['put']>) => {
        await store.put(...args);
        await spoolDelta(next, next + 9);
        next += 10;
      },
    },
  });
  const { uploader } = uploaderFor(chased);
  await uploader.drain();
  expect(await stored(store)).toEqual([name('Full', 0, 100), name('Incr', 101, 110), name('Incr', 111, 120)]);
  expect(spool.list().map((d) => d.startRevision)).toEqual([121, 131]);
});

it("uploads nothing that does not continue the store's chain: the chain restarts from the store", async () => {
  const store = await storeWithFullAt(100);
  await spoolDelta(121, 130);
  const { uploader, resyncs } = uploaderFor(store);
  await uploader.drain();
  expect(await stored(store)).toEqual([name('Full', 0, 100)]);
  expect(resyncs).toEqual([1]);
});

it('keeps the spool while the store fails, says it is unreachable, and uploads once it answers again', async () => {
  // A store whose folder is a file: every listing fails.
  await writeFile(join(dir, 'store'), '');
  await spoolDelta(101, 110);
  const { uploader } = uploaderFor(new LocalStore(join(dir, 'store')));
  expect(uploader.storeReachable).toBe(true);
  uploader.drainSoon(0);
  await expect.poll(() => uploader.storeReachable).toBe(false);
  expect(spool.depth).toBe(1);

  await rm(join(dir, 'store'));
  const store = await storeWithFullAt(100);
  await expect.poll(() => uploader.storeReachable, { timeout: 10_000 }).toBe(true);
  expect(spool.depth).toBe(0);
  expect(await stored(store)).toEqual([name('Full', 0, 100), name('Incr', 101, 110)]);
});

it("fills the revisions between the store's deltas and a spooled full snapshot from etcd's history before uploading it", async () => {
  const store = await storeWithFullAt(100);
  await store.put(name('Incr', 101, 110), Readable.from([Buffer.from('delta')]));
  await spool.add(
    { name: name('Full', 0, 150), startRevision: 0, lastRevision: 150, oldestEventAt: Date.now() },
    Readable.from([Buffer.from('full')]),
  );
  await spoolDelta(151, 160);
  const asked: Array<[number, number, string[]]> = [];
  const { uploader } = uploaderFor(store, async (from, through) => {
    asked.push([from, through, await stored(store)]);
    await store.put(name('Incr', from, through), Readable.from([Buffer.from('history')]));
    return name('Incr', from, through);
  });
  await uploader.drain();
  // asked before the full snapshot went up, for exactly the revisions no delta held
  expect(asked).toEqual([[111, 150, [name('Full', 0, 100), name('Incr', 101, 110)]]]);
  expect(await stored(store)).toEqual([
    name('Full', 0, 100),
    name('Incr', 101, 110),
    name('Full', 0, 150),
    name('Incr', 111, 150),
    name('Incr', 151, 160),
  ]);
});

it("records a delta's decompressed size with it, and a spooled full snapshot's db size, so a restore decompresses no more", async () => {
  const store = await storeWithFullAt(100);
  const json = Buffer.from('[{"a delta":"of some bytes"}]');
  await spool.add(
    { name: name('Incr', 101, 110), startRevision: 101, lastRevision: 110, oldestEventAt: Date.now() },
    Readable.from([json]),
    compressor('zstd'),
  );
  await spool.add(
    {
      name: name('Full', 0, 120),
      startRevision: 0,
      lastRevision: 120,
      oldestEventAt: Date.now(),
      decompressedBytes: 4096,
    },
    Readable.from([Buffer.from('a compressed db')]),
  );
  await uploaderFor(store).uploader.drain();
  expect((await store.stat(name('Incr', 101, 110)))?.metadata).toMatchObject({
    [METADATA_DECOMPRESSED_SIZE]: String(json.length),
  });
  expect((await store.stat(name('Full', 0, 120)))?.metadata).toMatchObject({ [METADATA_DB_SIZE]: '4096' });
});
