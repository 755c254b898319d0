import { closeSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { startCluster, type TestCluster, writeWorkload } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ebrStoreObject } from '../../../test/fixtures.js';
import { takeFullSnapshot } from '../src/backup/take-full-snapshot.js';
import { BboltReader, BRANCH_PAGE, LEAF_PAGE } from '../src/bbolt/bbolt-file.js';
import { dbFileRevision } from '../src/bbolt/db-file-revision.js';
import { SnapshotRevisionScanner } from '../src/bbolt/snapshot-revision.js';
import { IntegrityError } from '../src/common/errors.js';
import { decompressor } from '../src/format/compression.js';
import { FullSnapshotCheck } from '../src/format/full-snapshot-check.js';
import { parseSnapshotName } from '../src/format/snapshot-name.js';
import { LocalStore } from '../src/store/local.js';

async function check(bytes: Buffer) {
  const c = new FullSnapshotCheck('test snapshot');
  await pipeline(Readable.from([bytes]), c, async (source) => {
    for await (const _ of source);
  });
  return c.facts();
}

describe('full snapshot check', () => {
  it("reads the revision of ebr's fixture snapshots (etcd 3.4.23)", async () => {
    const plain = await readFile(ebrStoreObject('Full-00000000-00000007-1795299379'));
    expect((await check(plain)).revision).toBe(7);
    const gz: Buffer[] = [];
    await pipeline(
      Readable.from([await readFile(ebrStoreObject('Full-00000000-00000003-1795299353.gz'))]),
      createGunzip(),
      async (s) => {
        for await (const c of s) gz.push(c);
      },
    );
    expect((await check(Buffer.concat(gz))).revision).toBe(3);
  });

  it('reads the revision whatever the chunking', async () => {
    const plain = await readFile(ebrStoreObject('Full-00000000-00000007-1795299379'));
    for (const size of [1, 7, 31, 33, 4095, 4097]) {
      const chunks: Buffer[] = [];
      for (let i = 0; i < plain.length; i += size) chunks.push(plain.subarray(i, i + size));
      const c = new FullSnapshotCheck('chunked');
      await pipeline(Readable.from(chunks), c, async (s) => {
        for await (const _ of s);
      });
      expect(c.facts().revision).toBe(7);
    }
  });

  it('rejects a bit flip and a truncation', async () => {
    const plain = await readFile(ebrStoreObject('Full-00000000-00000007-1795299379'));
    const flipped = Buffer.from(plain);
    flipped[5000] ^= 0x10;
    await expect(check(flipped)).rejects.toThrow(/damaged: its content does not match its sha256/);
    await expect(check(plain.subarray(0, plain.length - 100))).rejects.toThrow(IntegrityError);
    await expect(check(plain.subarray(0, plain.length - 100))).rejects.toThrow(/truncated/);
  });
});

describe('takeFullSnapshot against a real etcd', () => {
  let cluster: TestCluster;
  let dir: string;
  beforeAll(async () => {
    cluster = await startCluster();
    dir = await mkdtemp(join(tmpdir(), 'full-snapshot-test-'));
  });
  afterAll(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('names the snapshot with the exact revision it holds and stores it verified', async () => {
    const client = cluster.client();
    await writeWorkload(client, { keys: 2000 });
    const before = Number((await client.kv.range({ key: Buffer.from('x') })).header.revision);
    const store = new LocalStore(join(dir, 'store'));
    for (const compression of ['zstd', 'gzip', 'none'] as const) {
      const saved = await takeFullSnapshot({
        connection: { endpoints: cluster.endpoints },
        store,
        compression,
        tempDir: dir,
      });
      expect(saved.revision).toBe(before);
      expect(parseSnapshotName(saved.ref.name)).toMatchObject({ kind: 'Full', startRevision: 0, lastRevision: before });
      // what is stored decompresses to a snapshot that verifies
      const c = new FullSnapshotCheck('stored');
      await pipeline(await store.get(saved.ref.name), decompressor(saved.ref.compression), c, async (s) => {
        for await (const _ of s);
      });
      expect(c.facts().revision).toBe(before);
      expect((await store.stat(saved.ref.name))?.metadata.sha256).toMatch(/^[0-9a-f]{64}$/);
    }
    // no temp files left behind
    expect((await readdir(dir)).filter((f) => f.startsWith('etcd-snapshot-'))).toEqual([]);
  });

  it('takes the revision from the compaction marks when compaction removed its last row, as etcd does', async () => {
    const client = cluster.client();
    await client.put('gone').value('v');
    const deleted = Number((await client.kv.deleteRange({ key: Buffer.from('gone') })).header.revision);
    // the tombstone at the last revision is compacted away: only meta's marks still say the revision
    await client.kv.compact({ revision: String(deleted), physical: true });
    const store = new LocalStore(join(dir, 'compacted-store'));
    const saved = await takeFullSnapshot({
      connection: { endpoints: cluster.endpoints },
      store,
      compression: 'none',
      tempDir: dir,
    });
    expect(saved.revision).toBe(deleted);
    const chunks: Buffer[] = [];
    for await (const chunk of await store.get(saved.ref.name)) chunks.push(chunk);
    const db = join(dir, 'compacted.db');
    await writeFile(db, Buffer.concat(chunks).subarray(0, -32));
    expect(await dbFileRevision(db)).toBe(deleted);
  });

  it("reads the revision past a free page whose stale header claims the pages after it, as etcd's free pages may, its page table in memory or on disk", async () => {
    const client = cluster.client();
    // Churn leaves free pages in the db; etcd's snapshot streams them with whatever they last held.
    for (let round = 0; round < 3; round++) {
      await writeWorkload(client, { keys: 1500, valueSize: 300, seed: round + 7, prefix: `/churn/${round}/` });
      await client.delete().prefix(`/churn/${round}/`);
    }
    const store = new LocalStore(join(dir, 'stale-store'));
    const saved = await takeFullSnapshot({
      connection: { endpoints: cluster.endpoints },
      store,
      compression: 'none',
      tempDir: dir,
    });
    const chunks: Buffer[] = [];
    for await (const chunk of await store.get(saved.ref.name)) chunks.push(chunk);
    const snapshot = Buffer.concat(chunks);
    const db = join(dir, 'stale.db');
    await writeFile(db, snapshot.subarray(0, -32));
    const { pageSize, free, lastKeyLeaf } = pageUse(db);
    // A free page before the key bucket's last leaf gets a header as a freed multi-page node's would have:
    // its own id, a leaf, and an overflow reaching over that leaf.
    const stale = free.filter((id) => id < lastKeyLeaf).at(-1);
    expect(stale).toBeDefined();
    const patched = Buffer.from(snapshot);
    const at = (stale as number) * pageSize;
    patched.writeBigUInt64LE(BigInt(stale as number), at);
    patched.writeUInt16LE(LEAF_PAGE, at + 8);
    patched.writeUInt16LE(0, at + 10);
    patched.writeUInt32LE(lastKeyLeaf - (stale as number), at + 12);
    // A window of 2 pages: the page table goes to its file after the first two, and is read back from there.
    const spillDir = join(dir, 'page-table');
    await mkdir(spillDir);
    for (const chunkSize of [4096, 65_536, 1 << 20]) {
      for (const table of [{}, { windowPages: 2, spillDir }]) {
        const scanner = new SnapshotRevisionScanner(table);
        for (let i = 0; i < patched.length; i += chunkSize) scanner.write(patched.subarray(i, i + chunkSize));
        expect(scanner.revision()).toBe(saved.revision);
        scanner.close();
      }
    }
    expect(await readdir(spillDir)).toEqual([]); // unlinked as soon as it was open
  });

  it('takes the snapshot from the next endpoint when the first is down', async () => {
    const store = new LocalStore(join(dir, 'fallback-store'));
    const saved = await takeFullSnapshot({
      connection: { endpoints: ['http://127.0.0.1:1', ...cluster.endpoints] },
      store,
      compression: 'none',
      tempDir: dir,
    });
    expect((await store.list()).map((o) => o.name)).toEqual([saved.ref.name]);
  });

  it('stores nothing when etcd is unreachable', async () => {
    const store = new LocalStore(join(dir, 'empty-store'));
    await expect(
      takeFullSnapshot({ connection: { endpoints: ['http://127.0.0.1:1'] }, store, compression: 'zstd', tempDir: dir }),
    ).rejects.toThrow(/cannot reach etcd at http:\/\/127.0.0.1:1/);
    expect(await store.list()).toEqual([]);
  });
});

/** The pages no bucket reaches (free) and the key bucket's last leaf, read with the random-access reader. */
function pageUse(path: string): { pageSize: number; free: number[]; lastKeyLeaf: number } {
  const fd = openSync(path, 'r');
  try {
    const reader = new BboltReader(fd);
    const used = new Set<number>([0, 1]);
    const walk = (id: number): number => {
      const page = reader.page(id);
      for (let k = 0; k <= page.readUInt32LE(12); k++) used.add(id + k);
      if (page.readUInt16LE(8) !== BRANCH_PAGE) return id;
      let last = id;
      for (let i = 0; i < page.readUInt16LE(10); i++) last = walk(Number(page.readBigUInt64LE(16 + i * 16 + 8)));
      return last;
    };
    let lastKeyLeaf = -1;
    used.add(reader.meta.root);
    for (const [name, bucket] of reader.buckets()) {
      if (bucket.inline) continue;
      const last = walk(bucket.root);
      if (name === 'key') lastKeyLeaf = last;
    }
    const free: number[] = [];
    for (let id = 2; id < reader.meta.pgid; id++) if (!used.has(id)) free.push(id);
    return { pageSize: reader.meta.pageSize, free, lastKeyLeaf };
  } finally {
    closeSync(fd);
  }
}
