import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { openStore, type SnapStore } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';
import { describeConformance } from './conformance.js';

describeConformance('local', async () => {
  const root = await mkdtemp(join(tmpdir(), 'store-local-'));
  return {
    // Each case writes into a folder of its own that is not there yet, as a writer does.
    open: (prefix) => openStore(`file://${join(root, prefix)}`, { allowMissingFolder: true }),
    partSize: 256 * 1024,
    stop: () => rm(root, { recursive: true, force: true }),
  };
});

describe('local store temp files', () => {
  it('clears what a killed writer left an hour ago, and keeps what a live one is writing', async () => {
    const root = await mkdtemp(join(tmpdir(), 'store-local-temps-'));
    try {
      await mkdir(join(root, '.tmp'));
      const stale = join(root, '.tmp', 'killed.part');
      const live = join(root, '.tmp', 'writing.part');
      await writeFile(stale, 'half a snapshot');
      await writeFile(live, 'being written');
      const twoHoursAgo = new Date(Date.now() - 2 * 60 * 60 * 1000);
      await utimes(stale, twoHoursAgo, twoHoursAgo);
      await openStore(`file://${root}`);
      expect(await readdir(join(root, '.tmp'))).toEqual(['writing.part']);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('local store putFile', () => {
  it('moves a finished file into place, and copies it when it lives on another file system', async () => {
    const root = await mkdtemp(join(tmpdir(), 'store-local-putfile-'));
    // /dev/shm is a tmpfs: a different file system from the temp dir on these machines
    const elsewhere = await mkdtemp(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'putfile-'));
    try {
      const store = (await openStore(`file://${root}`)) as SnapStore & Required<Pick<SnapStore, 'putFile'>>;
      for (const [dir, name] of [
        [root, 'v2/same-fs'],
        [elsewhere, 'v2/other-fs'],
      ] as const) {
        const file = join(dir, `${name.slice(3)}.tmp`);
        await writeFile(file, `content of ${name}`);
        await store.putFile(name, file, { metadata: { sha256: 'abc' } });
        expect(existsSync(file)).toBe(false);
        expect((await store.stat(name))?.metadata).toEqual({ sha256: 'abc' });
        const chunks: Buffer[] = [];
        for await (const c of await store.get(name)) chunks.push(c as Buffer);
        expect(Buffer.concat(chunks).toString()).toBe(`content of ${name}`);
      }
      expect(await readdir(join(root, '.tmp'))).toEqual([]);
    } finally {
      await rm(root, { recursive: true, force: true });
      await rm(elsewhere, { recursive: true, force: true });
    }
  });
});

describe('local store metadata of the earlier layout (.metadata/<object name>.json)', () => {
  it('is read as it is, and moved out of the way of ebr by the first write', async () => {
    const root = await mkdtemp(join(tmpdir(), 'store-local-legacy-'));
    try {
      const full = 'v2/Full-00000000-00000009-1700000000.gz';
      await mkdir(join(root, 'v2'));
      await mkdir(join(root, '.metadata', 'v2'), { recursive: true });
      await writeFile(join(root, full), 'snapshot');
      await writeFile(join(root, '.metadata', `${full}.json`), JSON.stringify({ sha256: 'abc' }));
      const store = await openStore(`file://${root}`);
      expect((await store.stat(full))?.metadata).toEqual({ sha256: 'abc' });

      await store.put('v2/Incr-00000010-00000011-1700000001.gz', Readable.from([Buffer.from('delta')]));
      expect(await readdir(join(root, '.metadata'))).toEqual([expect.stringMatching(/^[0-9a-f]{64}\.json$/)]);
      expect((await store.stat(full))?.metadata).toEqual({ sha256: 'abc' });
      expect((await store.list()).map((o) => o.name)).toEqual([full, 'v2/Incr-00000010-00000011-1700000001.gz']);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('local store: two writers of one name', () => {
  it("never pair one writer's object with the other's metadata", async () => {
    // Two sidecars on one store upload deltas under the same names with different bytes (an old pod not yet
    // gone); each records its sha256 in the object's metadata. Whichever wins, object and metadata must agree.
    const root = await mkdtemp(join(tmpdir(), 'store-local-writers-'));
    try {
      // three writers: two cross about once in 150 pairs of puts here, three more often
      const [a, b, c] = await Promise.all([1, 2, 3].map(() => openStore(`file://${root}`)));
      const put = (store: SnapStore, name: string, bytes: Buffer) =>
        store.put(name, Readable.from([bytes]), { metadata: { sha256: sha256(bytes) } });
      const crossed: string[] = [];
      for (let i = 0; i < 200; i++) {
        const name = `v2/Incr-00000001-${String(i + 2).padStart(8, '0')}-1700000000.gz`;
        await Promise.all([
          put(a, name, Buffer.from(`a writes ${i}`)),
          put(b, name, Buffer.from(`b ${i} is b's`)),
          put(c, name, Buffer.from(`c${i}`)),
        ]);
        const stored = await a.stat(name);
        const bytes = Buffer.concat(await (await a.get(name)).toArray());
        if (stored?.metadata.sha256 !== sha256(bytes)) crossed.push(name);
      }
      expect(crossed).toEqual([]);
      expect(await readdir(join(root, '.tmp'))).toEqual([]); // no lock, no temp file left
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('local store: a writer killed mid-commit', () => {
  it('leaves a lock that the next writer of that name breaks once it is 30 s old', async () => {
    const root = await mkdtemp(join(tmpdir(), 'store-local-lock-'));
    try {
      const name = 'v2/Full-00000000-00000001-1700000000.gz';
      const lock = join(root, '.tmp', `${createHash('sha256').update(name).digest('hex')}.lock`);
      await mkdir(join(root, '.tmp'));
      await writeFile(lock, '');
      const aMinuteAgo = new Date(Date.now() - 60_000);
      await utimes(lock, aMinuteAgo, aMinuteAgo);
      const store = await openStore(`file://${root}`);
      await store.put(name, Readable.from([Buffer.from('snapshot')]), { metadata: { sha256: 'ab'.repeat(32) } });
      expect((await store.stat(name))?.metadata.sha256).toBe('ab'.repeat(32));
      expect(await readdir(join(root, '.tmp'))).toEqual([]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}
