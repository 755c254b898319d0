import { cp, mkdir, readdir, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort, type KeyspaceFingerprint } from '@etcd-steward/core';
import { withBackedUpMember, withMember, writeWorkload } from '@etcd-steward/testing';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { damageKeyLeaf } from './data-dir-damage.js';
import { canMakePidNamespaces, IN_OWN_PID_NAMESPACE, startEtcdInOwnPidNamespace } from './pid-namespace.js';
import { runProgram } from './run-program.js';
import { type SidecarProcess, startSidecar, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

/**
 * The sidecar's /initialization/start and /status run bootstrap for one member, as etcd-wrapper asks for them
 * before it starts etcd (so no etcd runs here): a db with a flipped byte in a leaf page passes the sanity check
 * and fails the full one; with nothing in the store a failed check is Failed, with a backup it is restored.
 */
describe('the sidecar initializes the data dir (etcd-snapshot run, no etcd running)', () => {
  const path = tempDir('sidecar-initialization-');
  let stored: KeyspaceFingerprint;
  let sidecar: SidecarProcess | undefined;

  beforeAll(async () => {
    stored = await withBackedUpMember(path('good', 'data'), path('store'), (client) =>
      writeWorkload(client, { keys: 400, valueSize: 200 }),
    );
    await mkdir(path('empty-store'));
  });

  afterEach(async () => {
    await sidecar?.stop();
    sidecar = undefined;
  });

  /** A copy of the data dir whose `key` bucket has a damaged leaf (full mode finds it, sanity mode does not). */
  async function leafDamaged(name: string): Promise<string> {
    const dataDir = path(name, 'data');
    await cp(path('good', 'data'), dataDir, { recursive: true });
    await damageKeyLeaf(join(dataDir, 'member/snap/db'));
    return dataDir;
  }

  async function start(name: string, store: string, args: string[]): Promise<SidecarProcess> {
    sidecar = await startSidecar({
      endpoint: `http://127.0.0.1:${await freePort()}`, // etcd-wrapper has not started etcd yet
      store: `file://${store}`,
      dir: path(name, 'sidecar'),
      args: ['--no-snapshotter', ...args],
    });
    return sidecar;
  }

  /** Starts an initialization and waits for its outcome, as etcd-wrapper polls for it. */
  async function initialize(url: string, query: string): Promise<string> {
    expect((await fetch(`${url}/initialization/start?${query}`)).status).toBe(200);
    return waitFor(
      'the initialization to end',
      async () => {
        const status = await (await fetch(`${url}/initialization/status`)).text();
        return status !== 'Progress' && status;
      },
      120_000,
    );
  }

  it('with nothing in the store: sanity passes the damaged leaf (Successful), full finds it and cannot restore (Failed)', async () => {
    const dataDir = await leafDamaged('no-backup');
    const damaged = await readFile(join(dataDir, 'member/snap/db'));
    const { url } = await start('no-backup', path('empty-store'), ['--data-dir', dataDir]);
    expect(await (await fetch(`${url}/initialization/status`)).text()).toBe('New');
    expect(await initialize(url, 'mode=sanity')).toBe('Successful');
    expect(await (await fetch(`${url}/initialization/status`)).text()).toBe('New');
    expect(await initialize(url, 'mode=full')).toBe('Failed');
    expect(await readFile(join(dataDir, 'member/snap/db'))).toEqual(damaged);
    expect((await readdir(path('no-backup'))).sort()).toEqual(['data', 'sidecar']);
    expect(await sidecar?.log()).toMatch(/etcd must not start \(no-backup\)/);
  });

  it("with nothing in the store and --start-empty-without-backup (ebr's behaviour): the damaged data moved aside, Successful", async () => {
    const dataDir = await leafDamaged('start-empty');
    const { url } = await start('start-empty', path('empty-store'), [
      '--data-dir',
      dataDir,
      '--start-empty-without-backup',
    ]);
    expect(await initialize(url, 'mode=full')).toBe('Successful');
    const names = await readdir(path('start-empty'));
    expect(names.filter((n) => n.startsWith('data.bad-'))).toHaveLength(1);
    expect(names).not.toContain('data');
    expect(await sidecar?.log()).toMatch(/"case":"start-empty"/);
  });

  it('with a backup: full mode moves the damaged data aside, restores it, then Successful', async () => {
    const dataDir = await leafDamaged('restore');
    const { url } = await start('restore', path('store'), ['--data-dir', dataDir]);
    expect(await initialize(url, 'mode=full')).toBe('Successful');
    const aside = (await readdir(path('restore'))).filter((n) => n.startsWith('data.bad-'));
    expect(aside).toHaveLength(1);
    const check = await runProgram(
      'etcd-validate',
      ['check', '--data-dir', dataDir, '--mode', 'full', '--output', 'json'],
      {
        POD_NAMESPACE: '',
      },
    );
    expect(check.code).toBe(0);
    expect(JSON.parse(check.stdout).db.revision).toBe(stored.revision);
    // A sound data dir now: asked again, nothing more is done.
    expect(await initialize(url, `mode=full&failbelowrevision=${stored.revision}`)).toBe('Successful');
    expect((await readdir(path('restore'))).filter((n) => n.startsWith('data.bad-'))).toEqual(aside);
  });

  it('while etcd runs on the data dir: Failed, and the data dir is left to etcd', async () => {
    // a sound copy: etcd 3.5 refuses to start on the damaged leaf (its freelist walk panics)
    const dataDir = path('running', 'data');
    await cp(path('good', 'data'), dataDir, { recursive: true });
    await withMember(dataDir, async (_client, endpoint) => {
      sidecar = await startSidecar({
        endpoint,
        store: `file://${path('store')}`,
        dir: path('running', 'sidecar'),
        args: ['--no-snapshotter', '--data-dir', dataDir],
      });
      expect(await initialize(sidecar.url, 'mode=full')).toBe('Failed');
      expect(await sidecar.log()).toMatch(/etcd answers at .*not while it runs/);
    });
    expect((await readdir(path('running'))).filter((n) => n.startsWith('data.bad-'))).toEqual([]);
  });

  it.skipIf(!canMakePidNamespaces)(
    "while etcd runs in another container and does not answer the sidecar's probe: Failed, the data dir left to etcd",
    async () => {
      // etcd in a PID namespace of its own, the sidecar in another (a pod's containers): the sidecar's /proc/locks
      // does not list etcd's lock on the db (nor, the WAL elsewhere, any other: pid-namespace.ts says why), and its
      // --endpoints name no etcd (wrong TLS settings or a slow etcd look alike)
      const dataDir = path('other-namespace', 'data');
      await cp(path('good', 'data'), dataDir, { recursive: true });
      await rename(join(dataDir, 'member/wal'), path('other-namespace', 'wal'));
      const etcd = await startEtcdInOwnPidNamespace(dataDir, path('other-namespace', 'etcd.log'), [
        `--wal-dir=${path('other-namespace', 'wal')}`,
      ]);
      let namespaced: SidecarProcess | undefined;
      try {
        namespaced = await startSidecar({
          endpoint: `http://127.0.0.1:${await freePort()}`,
          store: `file://${path('store')}`,
          dir: path('other-namespace', 'sidecar'),
          args: ['--no-snapshotter', '--data-dir', dataDir],
          wrap: IN_OWN_PID_NAMESPACE,
        });
        // no member/wal and below failbelowrevision: bootstrap would move it aside and restore
        expect(await initialize(namespaced.url, `mode=full&failbelowrevision=${stored.revision + 1}`)).toBe('Failed');
        expect(await namespaced.log()).toMatch(
          /etcd is running on .*member\/snap\/db is locked by a process this one cannot see/,
        );
        expect((await readdir(path('other-namespace'))).sort()).toEqual(['data', 'etcd.log', 'sidecar', 'wal']);
        expect((await fetch(`${etcd.endpoint}/health`)).status).toBe(200);
      } finally {
        await namespaced?.kill(); // SIGKILL: unshare blocks SIGTERM while it waits
        await etcd.stop();
      }
    },
  );

  it('without --data-dir there is nothing to check: Failed', async () => {
    const { url } = await start('no-data-dir', path('store'), []);
    expect(await initialize(url, 'mode=sanity')).toBe('Failed');
    expect(await sidecar?.log()).toMatch(/no --data-dir/);
  });
});
