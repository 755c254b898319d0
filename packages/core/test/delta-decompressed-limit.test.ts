import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import {
  type CatalogEntry,
  compressor,
  encodeDelta,
  fetchDelta,
  IntegrityError,
  LocalStore,
  listSnapshots,
  METADATA_DECOMPRESSED_SIZE,
} from '@etcd-steward/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

/** Compressed as a store holds it: a few KiB of zstd for any number of zeros. */
async function zstd(...pieces: Array<Buffer | { zeros: number }>): Promise<Buffer> {
  async function* chunks() {
    for (const piece of pieces) {
      if (Buffer.isBuffer(piece)) yield piece;
      else for (let left = piece.zeros; left > 0; left -= 1 << 20) yield Buffer.alloc(Math.min(left, 1 << 20));
    }
  }
  return buffer(Readable.from(chunks()).pipe(compressor('zstd')));
}

describe("a delta's decompression bound", () => {
  let dir: string;
  let store: LocalStore;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'delta-bound-'));
    store = new LocalStore(join(dir, 'store'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const name = 'v2/Incr-00000101-00000101-1795313340.zst';
  const entryOf = async () => (await listSnapshots(store)).find((e) => e.name === name) as CatalogEntry;
  const fetchInto = async (base?: { revision: number; dbSize: number }) => {
    const file = join(dir, 'delta.json');
    const err = await fetchDelta(store, await entryOf(), file, { base }).then(
      () => undefined,
      (e: unknown) => e,
    );
    return { err, written: (await stat(file).catch(() => ({ size: 0 }))).size };
  };

  it('stops at the size recorded when the delta was stored, writing no more than that', async () => {
    await store.put(name, Readable.from([await zstd(Buffer.from('['), { zeros: 200 << 20 })]), {
      metadata: { [METADATA_DECOMPRESSED_SIZE]: '4096' },
    });
    const { err, written } = await fetchInto({ revision: 100, dbSize: 1 << 20 });
    expect(err).toBeInstanceOf(IntegrityError);
    expect((err as Error).message).toBe(
      `${store.location}/${name} is damaged or hostile: it decompresses to more than 4.0 KiB (the size recorded when it was stored); it was not used`,
    );
    expect(written).toBeLessThanOrEqual(4096);
  });

  it("without a recorded size (ebr's deltas), stops at what etcd could write in its revisions after the chain's full snapshot", async () => {
    // one revision right after a full snapshot of 1 MiB: two requests' worth and the deletion of every key it held,
    // about 37 MiB, where the compression ratio alone would allow 64 MiB
    await store.put(name, Readable.from([await zstd(Buffer.from('['), { zeros: 200 << 20 })]));
    const { err, written } = await fetchInto({ revision: 100, dbSize: 1 << 20 });
    expect(err).toBeInstanceOf(IntegrityError);
    expect((err as Error).message).toMatch(
      new RegExp(
        `^${store.location}/${name} is damaged or hostile: it decompresses to more than 36\\.\\d MiB \\(what etcd can write in its 1 revision\\(s\\), 1 after a full snapshot of 1\\.0 MiB\\); it was not used$`,
      ),
    );
    expect(written).toBeLessThan(37 << 20);

    // without its chain (a copy's check), the compression ratio's bound
    const { err: unchained } = await fetchInto();
    expect((unchained as Error).message).toContain('more than 64.0 MiB (1000 times its stored size, or 64 MiB)');
  });

  it('reads a sound delta whose recorded size is exact', async () => {
    const json = await buffer(
      encodeDelta([
        {
          type: 'put',
          key: Buffer.from('/a'),
          value: Buffer.from('1'),
          createRevision: 101,
          modRevision: 101,
          version: 1,
          lease: '0',
          time: '2026-11-27T00:00:00.000000001Z',
        },
      ]),
    );
    await store.put(name, Readable.from([await zstd(json)]), {
      metadata: { [METADATA_DECOMPRESSED_SIZE]: String(json.length) },
    });
    const { err, written } = await fetchInto({ revision: 100, dbSize: 1 << 20 });
    expect(err).toBeUndefined();
    expect(written).toBe(json.length);
  });
});
