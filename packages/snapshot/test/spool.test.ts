import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { Spool } from '@etcd-steward/snapshot';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, expect, it } from 'vitest';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spool-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const delta = (start: number, last: number) => ({
  name: `v2/Incr-${String(start).padStart(8, '0')}-${String(last).padStart(8, '0')}-1795313340.zst`,
  startRevision: start,
  lastRevision: last,
  oldestEventAt: 1795313340000,
});

it('keeps deltas durably in chain order, and survives a reopen', async () => {
  const spool = await Spool.open(dir, 1 << 20);
  const a = await spool.add(delta(2, 10), Readable.from([Buffer.from('first')]));
  await spool.add(delta(11, 20), Readable.from([Buffer.from('second')]));
  expect(a).toMatchObject({ startRevision: 2, lastRevision: 10, bytes: 5 });
  expect(a.sha256).toMatch(/^[0-9a-f]{64}$/);
  spool.close();

  const again = await Spool.open(dir, 1 << 20);
  expect(again.list().map((d) => d.lastRevision)).toEqual([10, 20]);
  expect(again.depth).toBe(2);
  expect(again.bytes).toBe(11);
  expect(await text(again.read(again.first()!))).toBe('first');
  await again.remove(again.first()!);
  expect(again.first()?.startRevision).toBe(11);
  expect(again.last()?.lastRevision).toBe(20);
  again.close();
});

it('drops the remains of an interrupted write at open, and rows whose file is gone', async () => {
  const spool = await Spool.open(dir, 1 << 20);
  const kept = await spool.add(delta(2, 10), Readable.from([Buffer.from('kept')]));
  const lost = await spool.add(delta(11, 20), Readable.from([Buffer.from('lost')]));
  spool.close();
  await writeFile(join(dir, 'deltas', 'Incr-00000021-00000030-1795313341.zst.part'), 'half');
  await writeFile(join(dir, 'deltas', 'Incr-00000021-00000030-1795313341.zst'), 'no row');
  await rm(join(dir, 'deltas', lost.name.slice(3)));

  const again = await Spool.open(dir, 1 << 20);
  expect(again.list().map((d) => d.name)).toEqual([kept.name]);
  expect(await readdir(join(dir, 'deltas'))).toEqual([kept.name.slice(3)]);
  again.close();
});

it('has no room once its files reach the cap; a failed write leaves nothing', async () => {
  const spool = await Spool.open(dir, 10);
  expect(spool.hasRoom()).toBe(true);
  await spool.add(delta(2, 10), Readable.from([Buffer.alloc(10)]));
  expect(spool.hasRoom()).toBe(false);
  const failing = new Readable({
    read() {
      this.destroy(new Error('disk on fire'));
    },
  });
  await expect(spool.add(delta(11, 20), failing)).rejects.toThrow('disk on fire');
  expect(spool.depth).toBe(1);
  expect(await readdir(join(dir, 'deltas'))).toHaveLength(1);
  spool.close();
});

it('keeps a delta begun before its name is known out of the queue until it is committed', async () => {
  const spool = await Spool.open(dir, 1 << 20);
  const source = new PassThrough();
  const draft = spool.begin(source);
  source.write('written as it comes');
  expect(spool.depth).toBe(0);
  source.end();
  const committed = await draft.commit(delta(2, 10));
  expect(committed).toMatchObject({ startRevision: 2, lastRevision: 10, bytes: 19 });
  expect(await text(spool.read(spool.first()!))).toBe('written as it comes');

  const dropped = new PassThrough();
  const abandoned = spool.begin(dropped);
  dropped.write('never finished');
  spool.close();
  const again = await Spool.open(dir, 1 << 20); // as after a crash: the part goes
  expect(await readdir(join(dir, 'deltas'))).toEqual([committed.name.slice(3)]);
  await abandoned.discard();
  again.close();
});

it('refuses a spool dir it cannot use, as a usage error', async () => {
  await writeFile(join(dir, 'file'), '');
  await expect(Spool.open(join(dir, 'file', 'spool'), 1)).rejects.toMatchObject({ exitCode: 2 });
});

it('opens a spool written before full snapshots could wait in it, and keeps its deltas', async () => {
  const old = new Database(join(dir, 'spool.db'));
  old.exec(`CREATE TABLE deltas (
    id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, start_revision INTEGER NOT NULL,
    last_revision INTEGER NOT NULL, bytes INTEGER NOT NULL, sha256 TEXT NOT NULL, oldest_event_at INTEGER NOT NULL)`);
  old.close();
  const spool = await Spool.open(dir, 1 << 20);
  await spool.add(delta(2, 10), Readable.from([Buffer.from('delta')]));
  const full = {
    name: 'v2/Full-00000000-00000020-1795313340.zst',
    startRevision: 0,
    lastRevision: 20,
    oldestEventAt: 1795313340000,
    etcdVersion: '3.4.23',
  };
  await spool.add(full, Readable.from([Buffer.from('full')]));
  spool.close();

  const again = await Spool.open(dir, 1 << 20);
  expect(again.list().map((d) => [d.name, d.etcdVersion])).toEqual([
    [delta(2, 10).name, null],
    [full.name, '3.4.23'],
  ]);
  again.close();
});
