import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreLockedError, withStoreLock } from '../src/backup/store-lock.js';
import { pidScope } from '../src/common/pid-scope.js';
import { LocalStore } from '../src/store/local.js';

let dir: string;
let store: LocalStore;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'store-lock-'));
  store = new LocalStore(dir);
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const lockOptions = { ttlMs: 60_000, settleMs: 300, purpose: 'test' };

describe('withStoreLock', () => {
  it('lets one of two takers at once run; the other is told who holds the lock', async () => {
    let running = 0;
    let most = 0;
    const work = async () => {
      most = Math.max(most, ++running);
      await new Promise((r) => setTimeout(r, 200));
      running--;
      return 'done';
    };
    const results = await Promise.allSettled([
      withStoreLock(store, 'maintenance', work, lockOptions),
      withStoreLock(store, 'maintenance', work, lockOptions),
    ]);
    expect(most).toBe(1);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toBeInstanceOf(StoreLockedError);
    expect(refused.reason.message).toMatch(/is locked by .+ \(test\) until .+: another gc or compaction runs/);
    // released: the next taker gets it, and no lock object is left
    await expect(withStoreLock(store, 'maintenance', async () => 'again', lockOptions)).resolves.toBe('again');
    expect(await store.list('')).toEqual([]);
  });

  it('takes over a lock whose holder died (expired), and keeps a live holder out', async () => {
    const dead = {
      token: 'x'.repeat(32),
      holder: 'gone:1',
      purpose: 'gc',
      expiresAt: new Date(Date.now() - 1000).toISOString(),
    };
    await store.put('locks/maintenance.json', Readable.from([Buffer.from(JSON.stringify(dead))]));
    await expect(withStoreLock(store, 'maintenance', async () => 'taken over', lockOptions)).resolves.toBe(
      'taken over',
    );

    const live = { ...dead, expiresAt: new Date(Date.now() + 60_000).toISOString() };
    await store.put('locks/maintenance.json', Readable.from([Buffer.from(JSON.stringify(live))]));
    let ran = false;
    await expect(
      withStoreLock(
        store,
        'maintenance',
        async () => {
          ran = true;
        },
        lockOptions,
      ),
    ).rejects.toThrow(/locked by gone:1 \(gc\)/);
    expect(ran).toBe(false);
  });

  it('takes over an unexpired lock only when its holder is known to have ended: same host and pid namespace, pid gone', async () => {
    const ended = spawnSync(process.execPath, ['-e', '']).pid;
    const record = (pid: number, scope = pidScope()) => ({
      token: 'z'.repeat(32),
      holder: `here:${pid}`,
      purpose: 'gc',
      expiresAt: new Date(Date.now() + 60_000).toISOString(),
      pid,
      scope,
    });
    const put = (r: object) => store.put('locks/maintenance.json', Readable.from([Buffer.from(JSON.stringify(r))]));
    const take = () => withStoreLock(store, 'maintenance', async () => 'taken', lockOptions);
    for (const live of [record(process.ppid), record(ended, 'elsewhere/boot/pid:[1]'), record(process.pid)]) {
      await put(live);
      await expect(take()).rejects.toThrow(/is locked by here:/);
    }
    await put(record(ended));
    await expect(take()).resolves.toBe('taken');
  });

  it('aborts the work when the lock is lost (a stalled holder whose lock another took), and refuses a lock it did not write', async () => {
    const lost = withStoreLock(
      store,
      'maintenance',
      async (signal) => {
        const other = {
          token: 'y'.repeat(32),
          holder: 'other:2',
          purpose: 'compaction',
          expiresAt: new Date(Date.now() + 60_000).toISOString(),
        };
        await store.put('locks/maintenance.json', Readable.from([Buffer.from(JSON.stringify(other))]));
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        throw signal.reason;
      },
      { ...lockOptions, ttlMs: 900 },
    );
    await expect(lost).rejects.toThrow(/lost the lock locks\/maintenance.json to other:2 \(compaction\)/);
    // the other holder's lock stays
    expect((await store.list('locks/')).map((o) => o.name)).toEqual(['locks/maintenance.json']);

    await store.put('locks/maintenance.json', Readable.from([Buffer.from('not json')]));
    await expect(withStoreLock(store, 'maintenance', async () => 1, lockOptions)).rejects.toThrow(
      /is not a lock this program wrote; if no gc or compaction runs, delete it/,
    );
  });
});
