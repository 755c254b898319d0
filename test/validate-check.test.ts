import { closeSync, openSync } from 'node:fs';
import { cp, open, readdir, readFile, rename, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BboltReader, type DataDirReport, decodeWalSegment, freePort, listWalSegments } from '@etcd-steward/core';
import { withBackedUpMember, withMember, writeWorkload } from '@etcd-steward/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { damageKeyLeaf, xorByte } from './data-dir-damage.js';
import { runProgram } from './run-program.js';
import { tempDir } from './temp-dir.js';

/** The verdicts of `etcd-validate check` on data dirs written by a real etcd, then damaged in copies. */
describe('etcd-validate check (the built program, data dirs of a real etcd)', () => {
  const path = tempDir('validate-check-');
  let storeUrl: string;

  // Raft snapshots every 100 entries, so that the WAL holds snapshot records and member/snap *.snap files.
  const snapshotEvery = ['--snapshot-count=100'];

  beforeAll(async () => {
    await withMember(
      path('stale', 'data'),
      (client) => writeWorkload(client, { keys: 400, valueSize: 200 }),
      snapshotEvery,
    );
    await cp(path('stale'), path('good'), { recursive: true });
    // The member runs on: more writes, then a full snapshot that the stale copy is behind.
    await withBackedUpMember(
      path('good', 'data'),
      path('store'),
      async (client) => {
        for (let i = 0; i < 150; i++) await client.put(`/later/${i}`).value('v'.repeat(100));
      },
      snapshotEvery,
    );
    storeUrl = `file://${path('store')}`;
  });

  /** A copy of the healthy data dir, alone in its folder (safe_guard lives beside the data dir). */
  async function copy(name: string): Promise<string> {
    await cp(path('good', 'data'), path(name, 'data'), { recursive: true });
    return path(name, 'data');
  }

  async function check(dataDir: string, args: string[] = [], env: NodeJS.ProcessEnv = {}) {
    const res = await runProgram('etcd-validate', ['check', '--data-dir', dataDir, '--output', 'json', ...args], {
      POD_NAMESPACE: '',
      ...env,
    });
    const report = res.stdout ? (JSON.parse(res.stdout) as DataDirReport) : undefined;
    return { ...res, report };
  }

  /** The records of the newest WAL segment: where each starts and how long its data is. */
  async function lastSegmentRecords(dataDir: string) {
    const segments = await listWalSegments(join(dataDir, 'member/wal'));
    const last = segments[segments.length - 1].path;
    const records: Array<{ type: number; offset: number; length: number }> = [];
    decodeWalSegment(last, { crc: 0, last: true }, (r) => records.push({ type: r.type, offset: r.offset, length: 0 }));
    const bytes = await readFile(last);
    for (const r of records) r.length = Number(bytes.readBigUInt64LE(r.offset) & 0x00ffffffffffffffn);
    return { file: last, records };
  }

  it('a healthy data dir is valid in both modes, and says so in one line', async () => {
    const dataDir = path('good', 'data');
    for (const mode of ['sanity', 'full']) {
      const { code, report } = await check(dataDir, ['--mode', mode]);
      expect(code).toBe(0);
      expect(report?.verdict).toBe('valid');
      expect(report?.db?.revision).toBeGreaterThan(300);
      expect(report?.db?.consistentIndex).toBeGreaterThan(0);
      expect(report?.wal?.tornTail).toBe(false);
      expect(report?.findings.filter((f) => f.severity === 'problem')).toEqual([]);
    }
    const full = await check(dataDir, ['--mode', 'full']);
    expect(full.report?.db?.pagesWalked).toBeGreaterThan(10);
    const text = await runProgram('etcd-validate', ['check', '--data-dir', dataDir], { POD_NAMESPACE: '' });
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^valid: .* is sound \(sanity check\): revision \d+, consistent index \d+\n$/);
  });

  it('a truncated db needs a restore', async () => {
    const dataDir = await copy('truncated');
    const db = join(dataDir, 'member/snap/db');
    // Half of the pages in use: bbolt grows the file ahead of them, so half the file may still hold them all.
    const fd = openSync(db, 'r');
    const { pgid, pageSize } = new BboltReader(fd).meta;
    closeSync(fd);
    await truncate(db, Math.floor(pgid / 2) * pageSize);
    const { code, report } = await check(dataDir);
    expect(code).toBe(3);
    expect(report?.verdict).toBe('restore-needed');
    expect(report?.reason).toMatch(/the db is truncated/);
  });

  it('one damaged meta page is a warning (bbolt opens the other); both is a restore', async () => {
    const dataDir = await copy('meta');
    const db = join(dataDir, 'member/snap/db');
    await xorByte(db, 64); // meta 0's txid: its checksum no longer holds
    const one = await check(dataDir, ['--mode', 'full']);
    expect(one.code).toBe(0);
    const warning = one.report?.findings.find((f) => f.check === 'db');
    expect(warning?.severity).toBe('warning');
    expect(warning?.message).toMatch(/meta page 0 is damaged; bbolt opens with meta page 1/);
    await xorByte(db, 4096 + 64);
    const both = await check(dataDir);
    expect(both.code).toBe(3);
    expect(both.report?.reason).toMatch(/both bbolt meta pages/);
  });

  it('a flipped byte in a leaf page passes sanity mode and fails full mode', async () => {
    const dataDir = await copy('leaf');
    await damageKeyLeaf(join(dataDir, 'member/snap/db'));
    const sanity = await check(dataDir);
    expect(sanity.code).toBe(0);
    expect(sanity.report?.verdict).toBe('valid');
    expect(sanity.report?.reason).toMatch(/ is sound \(sanity check\): revision \d+/);
    expect(sanity.report?.findings.filter((f) => f.check === 'db')).toEqual([]);
    const full = await check(dataDir, ['--mode', 'full']);
    expect(full.code).toBe(3);
    expect(full.report?.reason).toMatch(/^member\/snap\/db: bbolt page \d+: /);
  });

  it("damage on the key bucket's rightmost path needs a restore in sanity mode too", async () => {
    const dataDir = await copy('branch');
    const db = join(dataDir, 'member/snap/db');
    const fd = openSync(db, 'r');
    let rootStart: number;
    try {
      const reader = new BboltReader(fd);
      const key = reader.buckets().get('key');
      if (!key || key.root === 0) throw new Error('the key bucket should span pages');
      rootStart = key.root * reader.meta.pageSize;
    } finally {
      closeSync(fd);
    }
    // The root page's element count: its elements now run past the page.
    await xorByte(db, rootStart + 11, 0xf0);
    const { code, report } = await check(dataDir);
    expect(code).toBe(3);
    expect(report?.verdict).toBe('restore-needed');
    expect(report?.reason).toMatch(/^member\/snap\/db: /);
  });

  it('a torn last WAL record is what a crash leaves: valid, with a warning', async () => {
    const dataDir = await copy('torn');
    const { file, records } = await lastSegmentRecords(dataDir);
    const last = records[records.length - 1];
    const handle = await open(file, 'r+');
    await handle.write(Buffer.alloc(last.length), 0, last.length, last.offset + 8);
    await handle.close();
    // A last write cut short by the end of the file is torn too.
    const cut = await copy('torn-cut');
    const tail = await lastSegmentRecords(cut);
    await truncate(tail.file, tail.records[tail.records.length - 1].offset + 12);
    for (const [dir, mode] of [
      [dataDir, 'sanity'],
      [dataDir, 'full'],
      [cut, 'full'],
    ]) {
      const { code, report } = await check(dir, ['--mode', mode]);
      expect(code).toBe(0);
      expect(report?.wal?.tornTail).toBe(true);
      expect(report?.findings.map((f) => f.message).join()).toMatch(/torn/);
    }
  });

  it('a damaged WAL record before the tail needs a restore', async () => {
    const dataDir = await copy('wal-damage');
    const { file, records } = await lastSegmentRecords(dataDir);
    const entries = records.filter((r) => r.type === 2 && r.length > 32);
    const victim = entries[Math.floor(entries.length / 2)];
    await xorByte(file, victim.offset + 8 + victim.length - 4, 0x55);
    const { code, report } = await check(dataDir);
    expect(code).toBe(3);
    expect(report?.reason).toMatch(/WAL segment .* is damaged at byte \d+/);
  });

  it('a db older than the WAL (behind its last snapshot record) needs a restore', async () => {
    const dataDir = await copy('old-db');
    await cp(path('stale', 'data', 'member/snap/db'), join(dataDir, 'member/snap/db'));
    for (const mode of ['sanity', 'full']) {
      const { code, report } = await check(dataDir, ['--mode', mode]);
      expect(code).toBe(3);
      expect(report?.reason).toMatch(
        /etcd would start from the raft snapshot at index \d+, ahead of the db's consistent index \d+, and there is no member\/snap\/[0-9a-f]{16}\.snap\.db/,
      );
    }
  });

  /** The raft snapshot files of a data dir, oldest first. */
  async function snapFiles(dataDir: string): Promise<string[]> {
    return (await readdir(join(dataDir, 'member/snap'))).filter((n) => n.endsWith('.snap')).sort();
  }

  it("reads the newest raft snapshot file: sound, and the one the WAL's last snapshot record names", async () => {
    const dataDir = path('good', 'data');
    const newest = (await snapFiles(dataDir)).at(-1) as string;
    expect(newest).toMatch(/^[0-9a-f]{16}-[0-9a-f]{16}\.snap$/);
    for (const mode of ['sanity', 'full']) {
      const { code, report } = await check(dataDir, ['--mode', mode]);
      expect(code).toBe(0);
      expect(report?.snap?.file).toBe(newest);
      expect(report?.snap?.files).toBe((await snapFiles(dataDir)).length);
      expect(report?.findings.filter((f) => f.check === 'snap')).toEqual([]);
    }
    const { report } = await check(dataDir, ['--mode', 'full']);
    expect(report?.wal?.lastSnapshot).toEqual({ index: report?.snap?.index, term: report?.snap?.term });
    expect(report?.snap?.index).toBe(Number.parseInt(newest.slice(17, 33), 16));
  });

  it('a .snap file whose name is not what its metadata says: etcd goes by the metadata, valid with a warning', async () => {
    const dataDir = await copy('snap-name');
    const newest = (await snapFiles(dataDir)).at(-1) as string;
    const renamed = `${newest.slice(0, 17)}${'f'.repeat(16)}.snap`;
    await cp(join(dataDir, 'member/snap', newest), join(dataDir, 'member/snap', renamed));
    const { code, report } = await check(dataDir);
    expect(code).toBe(0);
    expect(report?.snap?.file).toBe(renamed);
    expect(report?.findings.find((f) => f.check === 'snap')?.message).toMatch(
      /holds the snapshot at index \d+, term \d+: etcd goes by that/,
    );
    await withMember(dataDir, async () => {}, snapshotEvery); // and etcd starts on it
  });

  it('the newest .snap file missing: etcd starts from the one before it, valid with a warning', async () => {
    const dataDir = await copy('snap-missing');
    const files = await snapFiles(dataDir);
    expect(files.length).toBeGreaterThan(1);
    await rm(join(dataDir, 'member/snap', files[files.length - 1]));
    const { code, report } = await check(dataDir, ['--mode', 'full']);
    expect(code).toBe(0);
    expect(report?.snap?.file).toBe(files[files.length - 2]);
    const warning = report?.findings.find((f) => f.check === 'snap');
    expect(warning?.severity).toBe('warning');
    expect(warning?.message).toMatch(/the WAL's last snapshot record \(index \d+\) has no \.snap file/);
  });

  it('the newest .snap file missing where the WAL no longer reaches back to the one before: a restore', async () => {
    const dataDir = await copy('snap-missing-wal');
    const files = await snapFiles(dataDir);
    await rm(join(dataDir, 'member/snap', files[files.length - 1]));
    // the WAL as etcd leaves it after removing the segments before its last snapshot: the oldest one starts there
    const [segment] = await listWalSegments(join(dataDir, 'member/wal'));
    const start = files[files.length - 1].slice(17, 33);
    await rename(segment.path, join(dataDir, 'member/wal', `${segment.name.slice(0, 17)}${start}.wal`));
    const { code, report } = await check(dataDir, ['--mode', 'full']);
    expect(code).toBe(3);
    expect(report?.reason).toMatch(
      new RegExp(
        `etcd would start from member/snap/${files[files.length - 2]} \\(index \\d+\\), the newest sound \\.snap a WAL snapshot record names, but the WAL's oldest segment .* starts after it`,
      ),
    );
  });

  it('no member/wal needs a restore', async () => {
    const dataDir = await copy('no-wal');
    await rm(join(dataDir, 'member/wal'), { recursive: true });
    const { code, report } = await check(dataDir);
    expect(code).toBe(3);
    expect(report?.reason).toMatch(/has no member\/wal folder/);
  });

  it('data behind the store is stale; data at the store is valid', async () => {
    const stale = await check(path('stale', 'data'), ['--store', storeUrl]);
    expect(stale.code).toBe(3);
    expect(stale.report?.reason).toMatch(
      /stale: etcd would serve revision \d+.*, the store's newest snapshot is at \d+/,
    );
    const good = await check(path('good', 'data'), ['--store', storeUrl]);
    expect(good.code).toBe(0);
    expect(good.report?.verdict).toBe('valid');
    expect(good.report?.store?.newestRevision).toBe(good.report?.db?.revision);
  });

  it("a data dir of another cluster, at or past the store's revision: cannot decide, nothing called valid", async () => {
    const other = path('other', 'data');
    // Another cluster: as many writes and more, other values, so its revision passes the store's.
    await withMember(other, async (client) => {
      await writeWorkload(client, { keys: 400, valueSize: 200, prefix: '/other/' });
      for (let i = 0; i < 200; i++) await client.put(`/other-later/${i}`).value('w'.repeat(100));
    });
    const res = await check(other, ['--store', storeUrl]);
    expect(res.report?.db?.revision).toBeGreaterThanOrEqual(res.report?.store?.newestRevision ?? 0);
    expect(res.code).toBe(6);
    expect(res.report?.verdict).toBe('cannot-decide');
    expect(res.report?.reason).toMatch(/the data dir and the store hold different histories: at revision \d+/);
  });

  it('a store that cannot be listed: cannot decide, and no credential in the output', async () => {
    const port = await freePort(); // nothing listens there
    const secret = 'validate-test-secret-never-shown';
    const res = await check(
      path('good', 'data'),
      ['--store', `s3://backups/etcd?endpoint=http://127.0.0.1:${port}&retries=0`],
      {
        AWS_ACCESS_KEY_ID: 'validate-test-key',
        AWS_SECRET_ACCESS_KEY: secret,
        AWS_REGION: 'us-east-1',
      },
    );
    expect(res.code).toBe(6);
    expect(res.report?.verdict).toBe('cannot-decide');
    expect(res.report?.reason).toMatch(/the data dir is sound, but the store could not be listed.*cannot reach/);
    expect(res.stdout + res.stderr).not.toContain(secret);
  });

  it('--fail-below-revision above the db revision needs a restore', async () => {
    const { report } = await check(path('good', 'data'));
    const revision = report?.db?.revision ?? 0;
    const below = await check(path('good', 'data'), ['--fail-below-revision', String(revision + 1)]);
    expect(below.code).toBe(3);
    expect(below.report?.verdict).toBe('restore-needed');
    expect(below.report?.reason).toBe(
      `etcd would serve revision ${revision}, below --fail-below-revision ${revision + 1}`,
    );
    const at = await check(path('good', 'data'), ['--fail-below-revision', String(revision)]);
    expect(at.code).toBe(0);
    expect(at.report?.verdict).toBe('valid');
  });

  it("safe_guard: written when missing, as ebr does; another namespace's volume is the wrong volume", async () => {
    const dataDir = await copy('guard');
    const first = await check(dataDir, [], { POD_NAMESPACE: 'shoot--a' });
    expect(first.code).toBe(0);
    expect(first.report?.verdict).toBe('valid');
    expect(first.report?.findings).toEqual([]);
    const guard = path('guard', 'safe_guard');
    expect(await readFile(guard, 'utf8')).toBe('shoot--a');
    expect((await stat(guard)).mode & 0o777).toBe(0o600);
    const other = await check(dataDir, [], { POD_NAMESPACE: 'shoot--b' });
    expect(other.code).toBe(5);
    expect(other.report?.verdict).toBe('wrong-volume');
    expect(other.report?.reason).toMatch(/names namespace "shoot--a", not this pod's "shoot--b"/);
  });

  it('bad usage exits 2 before any work and writes nothing', async () => {
    const dataDir = await copy('usage');
    await writeFile(path('usage', 'a-file'), 'x');
    const aFile = path('usage', 'a-file');
    const bad: [string[], string][] = [
      [['--mode', 'quick'], 'Invalid values: Argument: mode, Given: "quick", Choices: "sanity", "full" (see --help)'],
      [['--fail-below-revision', '-1'], '--fail-below-revision -1: give a whole number of revisions, 0 or more'],
      [
        ['--store', 'nope://x'],
        '--store "nope://x": unknown store scheme "nope:"; use one of file://, s3://, gs://, azblob://, swift://, oss://, ecs://, ocs://',
      ],
      [['--store', `file://${aFile}/store`], `--store file://${aFile}/store: ${aFile} is not a directory`],
    ];
    /** The one error line of a usage error, and nothing on stdout. */
    const usageError = (res: { code: number; stdout: string; stderr: string }) => {
      expect(res.code).toBe(2);
      expect(res.stdout).toBe('');
      const lines = res.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      return JSON.parse(lines[0]) as { level: string; msg: string };
    };
    for (const [args, msg] of bad) {
      const res = await check(dataDir, args, { POD_NAMESPACE: 'shoot--a' });
      expect(usageError(res), args.join(' ')).toMatchObject({ level: 'error', msg });
    }
    expect(usageError(await check(aFile, [], { POD_NAMESPACE: 'shoot--a' }))).toMatchObject({
      level: 'error',
      msg: `--data-dir ${aFile} is a file; give etcd's data dir (a folder)`,
    });
    await expect(stat(path('usage', 'safe_guard'))).rejects.toThrow(/ENOENT/);
  });
});
