import { cp, readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type BootstrapResult,
  type DataDirReport,
  decodeWalSegment,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  listWalSegments,
} from '@etcd-steward/core';
import { withBackedUpMember, withCrashedMember, withMember, writeWorkload } from '@etcd-steward/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { xorByte } from './data-dir-damage.js';
import { runProgram } from './run-program.js';
import { tempDir } from './temp-dir.js';

/**
 * `etcd-validate`'s verdict on a data dir a real etcd left is what etcd itself does when started on it: it starts
 * and serves the revision the check said, or it fails to start where the check said restore.
 */
describe('etcd-validate judges a data dir as etcd does (the built program, a real etcd started on it after)', () => {
  const path = tempDir('validate-as-etcd-');

  async function check(dataDir: string, args: string[] = []) {
    const res = await runProgram('etcd-validate', ['check', '--data-dir', dataDir, '--output', 'json', ...args], {
      POD_NAMESPACE: '',
    });
    return { ...res, report: res.stdout ? (JSON.parse(res.stdout) as DataDirReport) : undefined };
  }

  /** etcd started on the data dir, as it is: what it serves. */
  const served = (dataDir: string, extraArgs: string[] = []) =>
    withMember(dataDir, (client) => keyspaceFingerprint(client), extraArgs);

  describe('a crash (kill -9) that leaves the db behind the WAL', () => {
    let dbRevision: number;
    let stored: KeyspaceFingerprint;

    beforeAll(async () => {
      await withMember(path('crash', 'data'), (client) => writeWorkload(client, { keys: 300, valueSize: 100 }));
      // etcd writes the WAL (fsync) before it applies an entry, and commits the db's batch every 10 s here: the
      // last writes are in the WAL alone when etcd is killed.
      await withCrashedMember(
        path('crash', 'data'),
        async (client) => {
          for (let i = 0; i < 20; i++) await client.put(`/after/${i}`).value(`v${i}`);
          await client.delete().key('/data/00000001');
        },
        ['--backend-batch-interval=10s'],
      );
      dbRevision = (await check(path('crash', 'data'))).report?.db?.revision ?? 0;
      // The store's newest snapshot holds what etcd acknowledged: taken from a copy that etcd replayed.
      await cp(path('crash'), path('replayed'), { recursive: true });
      stored = await withBackedUpMember(path('replayed', 'data'), path('store'), async () => {});
    });

    it("is judged by the revision etcd serves after replaying its WAL, not the db's: valid, not stale", async () => {
      const dataDir = path('crash', 'data');
      expect(stored.revision).toBe(dbRevision + 21); // the test's premise: the db lacks the last 21 writes
      const { code, report } = await check(dataDir, ['--store', `file://${path('store')}`]);
      expect(code).toBe(0);
      expect(report?.verdict).toBe('valid');
      expect(report?.db?.revision).toBe(dbRevision);
      // 20 puts for certain, and a delete that creates a revision if its key exists
      expect(report?.served).toEqual({ atLeast: dbRevision + 20, atMost: dbRevision + 21 });
      expect(report?.reason).toContain(`revision ${dbRevision + 20} to ${dbRevision + 21} (${dbRevision} in the db`);
      expect(report?.findings.find((f) => f.check === 'store')?.message).toMatch(/lies within/);
      // past the most the WAL can give is still below
      const above = await check(dataDir, ['--fail-below-revision', String(dbRevision + 22)]);
      expect(above.code).toBe(3);
      expect(above.report?.reason).toMatch(/below --fail-below-revision/);

      const bootstrap = await runProgram(
        'etcd-validate',
        ['bootstrap', '--data-dir', dataDir, '--store', `file://${path('store')}`, '--output', 'json'],
        { POD_NAMESPACE: '' },
      );
      expect(bootstrap.code).toBe(0);
      expect((JSON.parse(bootstrap.stdout) as BootstrapResult).case).toBe('valid');
      expect(await readdir(path('crash'))).not.toContain(expect.stringMatching(/\.bad-/));

      // etcd on it serves every acknowledged write, at the revision the check gave as the most
      expect(await served(dataDir)).toEqual(stored);
    });
  });

  describe('raft snapshot files (--snapshot-count=100: several .snap files)', () => {
    const snapshotEvery = ['--snapshot-count=100'];
    let before: KeyspaceFingerprint;

    beforeAll(async () => {
      before = await withMember(
        path('snaps', 'data'),
        async (client) => {
          await writeWorkload(client, { keys: 400, valueSize: 100 });
          return keyspaceFingerprint(client);
        },
        snapshotEvery,
      );
    });

    const snapFiles = async (dataDir: string) =>
      (await readdir(join(dataDir, 'member/snap'))).filter((n) => n.endsWith('.snap')).sort();

    it('a damaged newest .snap: etcd sets it aside and starts from the one before; valid, and etcd serves every key', async () => {
      await cp(path('snaps'), path('snap-damage'), { recursive: true });
      const dataDir = path('snap-damage', 'data');
      const files = await snapFiles(dataDir);
      expect(files.length).toBeGreaterThan(1);
      const newest = join(dataDir, 'member/snap', files[files.length - 1]);
      await xorByte(newest, (await stat(newest)).size - 20, 0x01);
      for (const mode of ['sanity', 'full']) {
        const { code, report } = await check(dataDir, ['--mode', mode]);
        expect(code).toBe(0);
        expect(report?.snap?.file).toBe(files[files.length - 2]);
        expect(report?.findings.find((f) => f.check === 'snap')?.message).toMatch(
          new RegExp(`^member/snap/${files[files.length - 1]}: its crc .*\\.broken, and tries the one before`),
        );
      }
      expect(await served(dataDir, snapshotEvery)).toEqual(before);
      expect(await readdir(join(dataDir, 'member/snap'))).toContain(`${files[files.length - 1]}.broken`);
    });

    it('every .snap damaged: etcd replays the whole WAL, which still starts at index 0; valid', async () => {
      await cp(path('snaps'), path('snap-all'), { recursive: true });
      const dataDir = path('snap-all', 'data');
      for (const name of await snapFiles(dataDir)) {
        const file = join(dataDir, 'member/snap', name);
        await xorByte(file, (await stat(file)).size - 20, 0x01);
      }
      const { code, report } = await check(dataDir);
      expect(code).toBe(0);
      expect(report?.snap).toBeUndefined();
      expect(await served(dataDir, snapshotEvery)).toEqual(before);
    });
  });

  describe('a WAL of two segments (64 MB each)', () => {
    beforeAll(async () => {
      await withMember(path('segments', 'data'), async (client) => {
        const value = Buffer.alloc(1 << 20, 'x');
        for (let i = 0; i < 70; i++) await client.put(`/big/${i}`).value(value);
      });
    });

    it('a flipped byte in the older segment: etcd exits "crc mismatch", so sanity mode says restore', async () => {
      const segments = await listWalSegments(path('segments', 'data', 'member/wal'));
      expect(segments.length).toBeGreaterThan(1);
      const healthy = await check(path('segments', 'data'));
      expect(healthy.code).toBe(0);
      expect(healthy.report?.wal?.segmentsRead).toBe(segments.length);

      await cp(path('segments'), path('wal-damage'), { recursive: true });
      const dataDir = path('wal-damage', 'data');
      const [older] = await listWalSegments(join(dataDir, 'member/wal'));
      const entries: number[] = [];
      decodeWalSegment(older.path, { crc: 0, last: false }, (r) => {
        if (r.type === 2) entries.push(r.offset);
      });
      const victim = entries[Math.floor(entries.length / 2)];
      const length = Number((await readFile(older.path)).readBigUInt64LE(victim) & 0xffffffffffffffn);
      await xorByte(older.path, victim + 8 + Math.floor(length / 2), 0x55);

      for (const mode of ['sanity', 'full']) {
        const { code, report } = await check(dataDir, ['--mode', mode]);
        expect(code).toBe(3);
        expect(report?.reason).toMatch(new RegExp(`WAL segment .*${older.name} is damaged at byte ${victim}`));
      }
      await expect(served(dataDir)).rejects.toThrow(/crc mismatch/);
    });
  });
});
