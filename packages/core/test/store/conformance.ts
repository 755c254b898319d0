/**
 * The one suite every store provider must pass (restic's backend test suite, for our SnapStore). A provider's
 * test file starts its server and calls describeConformance with a way to open stores on it.
 */
import { createHash } from 'node:crypto';
import {
  DEFAULT_CHUNK_SIZE,
  ENCRYPTION_MAGIC,
  EncryptedStore,
  EncryptionKeyError,
  IntegrityError,
  type KeyRing,
  type ObjectNotFoundError,
  parseKeyFile,
  type SnapStore,
  UsageError,
} from '@etcd-steward/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodyOf, failingBody, randomData, readAll, stallingBody } from './streams.js';

export interface ConformanceTarget {
  /** Opens a store on the provider under this prefix (stores with different prefixes share a bucket). */
  open(prefix: string): Promise<SnapStore>;
  /** The part size the target configured: multi-part tests write more than two parts. */
  partSize: number;
  /** Uploads begun and neither finished nor abandoned on the server, when the server can tell. */
  pendingUploads?(): Promise<number>;
  stop(): Promise<void>;
}

export function describeConformance(provider: string, start: () => Promise<ConformanceTarget>): void {
  describe(`${provider} store conformance`, () => {
    let target: ConformanceTarget;
    let counter = 0;
    const stores: SnapStore[] = [];
    /** A fresh prefix per test, so that tests never see each other's objects. */
    const fresh = async (prefix = `t${++counter}`) => {
      const store = await target.open(`conformance/${prefix}`);
      stores.push(store);
      return store;
    };

    beforeAll(async () => {
      target = await start();
    });
    afterAll(async () => {
      await Promise.all(stores.map((s) => s.close?.()));
      await target?.stop();
    });

    it('round-trips an empty object', async () => {
      const store = await fresh();
      await store.put('v2/empty', bodyOf(Buffer.alloc(0)));
      expect((await readAll(await store.get('v2/empty'))).length).toBe(0);
      expect(await store.stat('v2/empty')).toMatchObject({ name: 'v2/empty', size: 0 });
    });

    it('round-trips a small object with its metadata', async () => {
      const store = await fresh();
      const data = randomData(1234);
      const metadata = { sha256: createHash('sha256').update(data).digest('hex'), 'etcd-version': '3.5.17' };
      await store.put('v2/Full-00000000-00000001-1700000000.gz', bodyOf(data), { metadata });
      expect(await readAll(await store.get('v2/Full-00000000-00000001-1700000000.gz'))).toEqual(data);
      const stat = await store.stat('v2/Full-00000000-00000001-1700000000.gz');
      expect(stat).toMatchObject({ size: 1234, metadata });
      expect(stat!.lastModified.getTime()).toBeGreaterThan(Date.now() - 10 * 60_000);
    });

    it('round-trips an object of more than two parts', async () => {
      const store = await fresh();
      const data = randomData(target.partSize * 2 + 12_345);
      await store.put('v2/big', bodyOf(data, 100_000));
      const back = await readAll(await store.get('v2/big'));
      expect(back.length).toBe(data.length);
      expect(back.equals(data)).toBe(true);
      expect((await store.stat('v2/big'))?.size).toBe(data.length);
    });

    it('streams a read: the first bytes arrive before the rest is read', async () => {
      const store = await fresh();
      const data = randomData(target.partSize * 2 + 1);
      await store.put('v2/stream', bodyOf(data));
      const stream = await store.get('v2/stream');
      const first: Buffer = await new Promise((resolve, reject) => {
        stream.once('data', resolve);
        stream.once('error', reject);
      });
      stream.pause();
      expect(first.length).toBeGreaterThan(0);
      expect(first.length).toBeLessThan(data.length);
      const rest = await readAll(stream);
      expect(Buffer.concat([first, rest]).equals(data)).toBe(true);
    });

    it('reads from an offset', async () => {
      const store = await fresh();
      const data = randomData(100_000);
      await store.put('v2/offset', bodyOf(data));
      expect((await readAll(await store.get('v2/offset', { offset: 70_000 }))).equals(data.subarray(70_000))).toBe(
        true,
      );
    });

    it('replaces an object on a second put', async () => {
      const store = await fresh();
      await store.put('v2/x', bodyOf(Buffer.from('first')), { metadata: { n: '1' } });
      await store.put('v2/x', bodyOf(Buffer.from('second!')), { metadata: { n: '2' } });
      expect((await readAll(await store.get('v2/x'))).toString()).toBe('second!');
      expect(await store.stat('v2/x')).toMatchObject({ size: 7, metadata: { n: '2' } });
    });

    it('lists more than 1,000 objects, across pages, sorted', async () => {
      const store = await fresh();
      const names = Array.from({ length: 1010 }, (_, i) => `v2/Incr-${String(i).padStart(8, '0')}-x`);
      await inBatches(names, 32, (name) => store.put(name, bodyOf(Buffer.from(name))));
      await store.put('v1/Backup-1/Full-x', bodyOf(Buffer.from('legacy')));
      const listed = await store.list('v2/');
      expect(listed.map((o) => o.name)).toEqual(names);
      expect(listed[0]).toMatchObject({ size: names[0].length });
      expect((await store.list()).length).toBe(1011);
      expect((await store.list('v2/Incr-000010')).map((o) => o.name)).toEqual(names.slice(1000, 1010));
    });

    it('keeps stores with different prefixes apart, even when one prefix starts the other', async () => {
      const a = await fresh('iso-a');
      const ab = await fresh('iso-ab');
      await a.put('v2/same', bodyOf(Buffer.from('in a')));
      await ab.put('v2/same', bodyOf(Buffer.from('in ab')));
      await ab.put('v2/only-ab', bodyOf(Buffer.from('x')));
      expect((await a.list()).map((o) => o.name)).toEqual(['v2/same']);
      expect((await ab.list()).map((o) => o.name)).toEqual(['v2/only-ab', 'v2/same']);
      expect((await readAll(await a.get('v2/same'))).toString()).toBe('in a');
      await a.delete('v2/same');
      expect((await readAll(await ab.get('v2/same'))).toString()).toBe('in ab');
    });

    it('deletes, and deleting a missing object is no error', async () => {
      const store = await fresh();
      await store.put('v2/gone', bodyOf(Buffer.from('bye')), { metadata: { a: 'b' } });
      await store.delete('v2/gone');
      expect(await store.stat('v2/gone')).toBeUndefined();
      expect(await store.list()).toEqual([]);
      await store.delete('v2/gone');
      await store.delete('v2/never-was');
    });

    it('reports a missing object: stat undefined, get rejects before streaming', async () => {
      const store = await fresh();
      expect(await store.stat('v2/missing')).toBeUndefined();
      await expect(store.get('v2/missing')).rejects.toMatchObject({
        name: 'ObjectNotFoundError',
        message: expect.stringContaining('v2/missing'),
      } satisfies Partial<ObjectNotFoundError>);
    });

    it('takes concurrent writers to different keys', async () => {
      const store = await fresh();
      const bodies = Array.from({ length: 6 }, (_, i) => randomData(i % 2 ? target.partSize + 1000 : 5000));
      await Promise.all(bodies.map((data, i) => store.put(`v2/c${i}`, bodyOf(data))));
      for (const [i, data] of bodies.entries())
        expect((await readAll(await store.get(`v2/c${i}`))).equals(data)).toBe(true);
    });

    it('leaves nothing behind when a put is aborted midway', async () => {
      const store = await fresh();
      const data = randomData(target.partSize * 3);
      const controller = new AbortController();
      const put = store.put('v2/aborted', stallingBody(data, target.partSize * 2 + 100), { signal: controller.signal });
      await new Promise((resolve) => setTimeout(resolve, 500));
      controller.abort();
      await expect(put).rejects.toThrow();
      expect(await store.stat('v2/aborted')).toBeUndefined();
      expect(await store.list()).toEqual([]);
      if (target.pendingUploads) expect(await target.pendingUploads()).toBe(0);
    });

    it('returns when a put is aborted while its body hangs within the first part', async () => {
      const store = await fresh();
      const controller = new AbortController();
      const put = store.put('v2/hung', stallingBody(randomData(target.partSize * 3), 100), {
        signal: controller.signal,
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      controller.abort();
      await expect(put).rejects.toThrow();
      expect(await store.stat('v2/hung')).toBeUndefined();
    });

    it('leaves nothing behind when the body fails midway, and the old object stays', async () => {
      const store = await fresh();
      await store.put('v2/kept', bodyOf(Buffer.from('old')));
      const data = randomData(target.partSize * 2 + 5);
      await expect(store.put('v2/kept', failingBody(data, target.partSize + 10))).rejects.toThrow();
      await expect(store.put('v2/new', failingBody(data, 10))).rejects.toThrow();
      expect((await readAll(await store.get('v2/kept'))).toString()).toBe('old');
      expect((await store.list()).map((o) => o.name)).toEqual(['v2/kept']);
      if (target.pendingUploads) expect(await target.pendingUploads()).toBe(0);
    });

    it('refuses names that could escape the prefix, and metadata not every provider keeps', async () => {
      const store = await fresh();
      for (const bad of ['', '../x', 'a//b', '/abs', 'a/./b']) {
        await expect(store.put(bad, bodyOf(Buffer.from('x')))).rejects.toBeInstanceOf(UsageError);
      }
      for (const key of ['Upper', 'under_score', '1digit', 'dot.ted']) {
        await expect(store.put('v2/m', bodyOf(Buffer.from('x')), { metadata: { [key]: 'v' } })).rejects.toBeInstanceOf(
          UsageError,
        );
      }
      expect(await store.stat('v2/m')).toBeUndefined();
    });

    it("refuses names under the local store's own folders (.metadata/, .tmp/), saying they are reserved", async () => {
      const store = await fresh();
      for (const reserved of ['.metadata/v2/Full-00000000-00000001-1700000000.gz.json', '.tmp/x.part', '.tmp']) {
        await expect(store.put(reserved, bodyOf(Buffer.from('x')))).rejects.toThrow(/reserved/);
      }
      expect(await store.list()).toEqual([]);
    });

    describe('with client-side encryption (docs/encryption.md)', () => {
      const name = 'v2/Full-00000000-00000009-1700000000.zst';
      const keys = parseKeyFile(`old ${'11'.repeat(32)}\nnew ${'22'.repeat(32)}\n`, 'keys.txt');
      const rotated = parseKeyFile(`new ${'22'.repeat(32)}\nold ${'11'.repeat(32)}\n`, 'rotated.txt');
      const impostor = parseKeyFile(`old ${'33'.repeat(32)}\n`, 'impostor.txt');
      /** The store as it is (plain bytes in and out), and the same store through a key ring. */
      const pair = async () => {
        const raw = (await fresh()) as EncryptedStore;
        return { raw: raw.unwrap(), with: (ring?: KeyRing) => new EncryptedStore(raw.unwrap(), ring) };
      };
      /** Three chunks and a bit, so that chunks can be swapped and cut. */
      const data = randomData(3 * DEFAULT_CHUNK_SIZE + 4321);
      const sealed = async () => {
        const p = await pair();
        await p.with(keys).put(name, bodyOf(data), { metadata: { sha256: 'a'.repeat(64) } });
        return { ...p, bytes: await readAll(await p.raw.get(name)) };
      };

      it('round-trips a snapshot that is stored encrypted, its key id recorded, and reads it with a rotated key file', async () => {
        const { raw, with: through, bytes } = await sealed();
        expect(bytes.subarray(0, 8)).toEqual(ENCRYPTION_MAGIC);
        expect(bytes.indexOf(data.subarray(1000, 1064))).toBe(-1);
        expect((await readAll(await through(keys).get(name))).equals(data)).toBe(true);
        expect((await readAll(await through(rotated).get(name))).equals(data)).toBe(true);
        expect((await raw.stat(name))?.metadata).toMatchObject({ 'encryption-key-id': 'old', sha256: 'a'.repeat(64) });
        // A plain snapshot from before it (a mixed store) and the store lock (not a snapshot) read as they are.
        const plain = 'v2/Incr-00000001-00000008-1699999999.zst';
        await raw.put(plain, bodyOf(Buffer.from('plain delta')));
        expect((await readAll(await through(keys).get(plain))).toString()).toBe('plain delta');
        await through(keys).put('v2/etcd-steward.lock', bodyOf(Buffer.from('{}')));
        expect((await readAll(await raw.get('v2/etcd-steward.lock'))).toString()).toBe('{}');
      });

      it('detects a flipped byte, a cut tail, swapped chunks and a wrong or missing key, naming the object', async () => {
        const { raw, with: through, bytes } = await sealed();
        const nameSeal = name.length + 1 + 16;
        const header = bytes.length - data.length - 4 * 16 - nameSeal;
        const chunk = DEFAULT_CHUNK_SIZE + 16;
        const at = (i: number) => header + i * chunk;
        const flipped = Buffer.from(bytes);
        flipped[at(1) + 77] ^= 1;
        const swapped = Buffer.concat([
          bytes.subarray(0, at(0)),
          bytes.subarray(at(1), at(2)),
          bytes.subarray(at(0), at(1)),
          bytes.subarray(at(2)),
        ]);
        // The key ring holds the header's key id, so a header that does not authenticate is damage, not a key error.
        const wrappedKey = Buffer.from(bytes);
        wrappedKey[header - 16 - 5] ^= 1;
        const damaged: Array<[string, Buffer, RegExp?]> = [
          ['a flipped byte', flipped],
          [
            'a changed byte of the wrapped data key',
            wrappedKey,
            /encryption header does not authenticate with key "old"/,
          ],
          ['a tail cut at a chunk boundary', bytes.subarray(0, at(3))],
          // The seal holds, so only the last-chunk flag of the nonce tells that chunk 2 was not written last.
          [
            'the last chunk dropped, the name seal kept',
            Buffer.concat([bytes.subarray(0, at(3)), bytes.subarray(bytes.length - nameSeal)]),
            /encrypted chunk 2 does not authenticate/,
          ],
          ['a tail cut inside a chunk', bytes.subarray(0, bytes.length - 100)],
          ['two chunks swapped', swapped],
          ['a header cut short', bytes.subarray(0, 40)],
          ['the name seal cut off', bytes.subarray(0, bytes.length - nameSeal)],
        ];
        for (const [what, body, says] of damaged) {
          await raw.put(name, bodyOf(body));
          const err = await readAll(await through(keys).get(name)).catch((e: unknown) => e);
          expect(err, what).toBeInstanceOf(IntegrityError);
          expect((err as Error).message, what).toContain(`${raw.location}/${name}`);
          if (says) expect((err as Error).message, what).toMatch(says);
        }
        await raw.put(name, bodyOf(bytes));
        // Another key under the object's key id cannot be told from a changed header: damage, naming both causes.
        const impostorErr = await readAll(await through(impostor).get(name)).catch((e: unknown) => e);
        expect(impostorErr).toBeInstanceOf(IntegrityError);
        expect((impostorErr as Error).message).toMatch(
          /is damaged: its encryption header does not authenticate with key "old" of impostor.txt \(a changed byte, or the file holds another key under that id\)/,
        );
        for (const [ring, says] of [
          [
            parseKeyFile(`other ${'44'.repeat(32)}`, 'other.txt'),
            /encrypted with key "old", which other.txt does not hold/,
          ],
          [undefined, /encrypted with key "old": give --encryption-key-file/],
        ] as const) {
          const err = await readAll(await through(ring).get(name)).catch((e: unknown) => e);
          expect(err).toBeInstanceOf(EncryptionKeyError);
          expect((err as Error).message).toMatch(says);
          expect((err as Error).message).toContain(name);
        }
      });

      it('with a key, refuses a plain snapshot newer than the first encrypted one (a substitute), and reads older plain ones', async () => {
        const p = await pair();
        const plain = (n: string) => p.raw.put(n, bodyOf(Buffer.from(`plain ${n}`)));
        // Plain before encryption was turned on, then encrypted: a store migrated in place.
        await plain('v2/Full-00000000-00000005-1700000000.zst');
        await plain('v2/Incr-00000006-00000008-1700000010.zst');
        await p.with(keys).put('v2/Incr-00000009-00000010-1700000020.zst', bodyOf(data));
        await p.with(keys).put('v2/Full-00000000-00000010-1700000030.zst', bodyOf(data));
        const readWith = async (n: string, ring?: KeyRing) =>
          readAll(await p.with(ring).get(n)).catch((e: unknown) => e);
        for (const older of ['v2/Full-00000000-00000005-1700000000.zst', 'v2/Incr-00000006-00000008-1700000010.zst']) {
          expect(String(await readWith(older, keys))).toBe(`plain ${older}`);
        }
        // The newest full put back plain under its own name, and a plain one named with a later revision but an
        // early time: neither is read with the key; without a key, what was asked for is read as it is.
        const substitutes = [
          ['v2/Full-00000000-00000010-1700000030.zst', 'v2/Incr-00000009-00000010-1700000020.zst'],
          ['v2/Full-00000000-00000012-1700000001.zst', 'v2/Incr-00000009-00000010-1700000020.zst'],
        ];
        for (const [substitute, older] of substitutes) {
          await plain(substitute);
          const err = await readWith(substitute, keys);
          expect(err, substitute).toBeInstanceOf(IntegrityError);
          expect((err as Error).message).toBe(
            `${p.raw.location}/${substitute} is not encrypted, but the store holds an encrypted snapshot from before it (${older}): a plain snapshot newer than the first encrypted one is taken for a substitute and not used; delete it if nobody meant to write it plain (docs/encryption.md §1)`,
          );
          expect(String(await readWith(substitute))).toBe(`plain ${substitute}`);
        }
      });

      it('refuses an encrypted snapshot stored under another name than it was written for, naming both', async () => {
        const { raw, with: through, bytes } = await sealed();
        const other = 'v2/Full-00000000-00000012-1700000002.zst';
        await raw.put(other, bodyOf(bytes));
        const err = await readAll(await through(keys).get(other)).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(IntegrityError);
        expect((err as Error).message).toBe(
          `${raw.location}/${other} was encrypted as ${name}: it was moved or swapped; put it back under that name, or delete it`,
        );
      });
    });
  });
}

async function inBatches<T>(items: T[], size: number, run: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(run));
}
