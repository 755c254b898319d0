import { cp, mkdir, readdir, readFile, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { type BootstrapResult, freePort, type KeyspaceFingerprint } from '@etcd-steward/core';
import { fingerprintRestored, withBackedUpMember, withMember, writeWorkload } from '@etcd-steward/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { xorByte } from './data-dir-damage.js';
import { canMakePidNamespaces, IN_OWN_PID_NAMESPACE, startEtcdInOwnPidNamespace } from './pid-namespace.js';
import { runProgram } from './run-program.js';
import { tempDir } from './temp-dir.js';

/**
 * `etcd-validate bootstrap` for a single member, a test per row of docs/validate.md, Bootstrap (the rows of a
 * multi-member cluster are in validate-bootstrap-cluster.test.ts), on data dirs a real etcd wrote.
 */
describe('etcd-validate bootstrap (the built program, one member)', () => {
  const path = tempDir('validate-bootstrap-');
  let storeUrl: string;
  let emptyStoreUrl: string;
  /** The keyspace the store's newest full snapshot holds. */
  let stored: KeyspaceFingerprint;

  beforeAll(async () => {
    await withMember(path('stale', 'data'), (client) => writeWorkload(client, { keys: 300, valueSize: 200 }));
    await cp(path('stale'), path('good'), { recursive: true });
    stored = await withBackedUpMember(path('good', 'data'), path('store'), async (client) => {
      for (let i = 0; i < 100; i++) await client.put(`/later/${i}`).value('v'.repeat(100));
    });
    storeUrl = `file://${path('store')}`;
    await mkdir(path('empty-store'));
    emptyStoreUrl = `file://${path('empty-store')}`;
  });

  /** A copy of a data dir alone in its folder (safe_guard and the moved-aside data go beside it). */
  async function copy(name: string, from = 'good'): Promise<string> {
    await cp(path(from, 'data'), path(name, 'data'), { recursive: true });
    return path(name, 'data');
  }

  /** This member, as bootstrap lays out a restored data dir for it and as etcd starts on it. */
  async function member() {
    const peerPort = await freePort();
    return {
      peerPort,
      flags: ['--name', 'm0', '--initial-advertise-peer-urls', `http://127.0.0.1:${peerPort}`],
    };
  }

  async function bootstrap(dataDir: string, args: string[], env: NodeJS.ProcessEnv = {}) {
    const res = await runProgram('etcd-validate', ['bootstrap', '--data-dir', dataDir, '--output', 'json', ...args], {
      POD_NAMESPACE: '',
      ...env,
    });
    const result = res.stdout ? (JSON.parse(res.stdout) as BootstrapResult) : undefined;
    return { ...res, result };
  }

  /** A copy whose db has a flipped byte in both meta pages: bbolt cannot open it. */
  async function corrupt(name: string): Promise<string> {
    const dataDir = await copy(name);
    await xorByte(join(dataDir, 'member/snap/db'), 64);
    await xorByte(join(dataDir, 'member/snap/db'), 4096 + 64);
    return dataDir;
  }

  const siblings = async (name: string) => (await readdir(path(name))).sort();

  it('row valid: a sound, current data dir is left as it is', async () => {
    const dataDir = await copy('valid');
    const before = (await stat(join(dataDir, 'member/snap/db'))).mtimeMs;
    const { code, result } = await bootstrap(dataDir, ['--store', storeUrl, '--mode', 'full']);
    expect(code).toBe(0);
    expect(result?.case).toBe('valid');
    expect(result?.action).toBe('start');
    expect((await stat(join(dataDir, 'member/snap/db'))).mtimeMs).toBe(before);
    expect(await siblings('valid')).toEqual(['data']);
  });

  it('refuses (exit 2) a data dir that an etcd is running on, and moves nothing', async () => {
    // stale against the store: without the refusal, bootstrap would move the live member's data aside
    const dataDir = await copy('running', 'stale');
    await withMember(dataDir, async () => {
      const { code, stderr } = await bootstrap(dataDir, ['--store', storeUrl]);
      expect(code).toBe(2);
      expect(stderr).toMatch(
        /etcd is running on .*: .*member\/(snap\/db|wal\/[0-9a-f-]+\.wal) is locked by process \d+\. .*stop that etcd first/,
      );
      expect(await siblings('running')).toEqual(['data', 'etcd.log']);
    });
  });

  it.skipIf(!canMakePidNamespaces)(
    "refuses (exit 2) an etcd of another PID namespace, which /proc/locks does not list: bbolt's lock on the db answers",
    async () => {
      // As in a pod: etcd in its container, bootstrap in another whose /proc shows neither etcd nor its db's lock.
      // Its WAL elsewhere, so that no lock of the data dir shows in /proc/locks (pid-namespace.ts says why): the
      // data dir then lacks member/wal, and without the lock bootstrap would move it aside and restore it.
      const dataDir = await copy('other-namespace', 'stale');
      await rename(join(dataDir, 'member/wal'), path('other-namespace', 'wal'));
      const etcd = await startEtcdInOwnPidNamespace(dataDir, path('other-namespace', 'etcd.log'), [
        `--wal-dir=${path('other-namespace', 'wal')}`,
      ]);
      try {
        const { code, stderr } = await runProgram(
          'etcd-validate',
          ['bootstrap', '--data-dir', dataDir, '--store', storeUrl, '--output', 'json'],
          { POD_NAMESPACE: '' },
          IN_OWN_PID_NAMESPACE,
        );
        expect(stderr).toMatch(
          /etcd is running on .*: .*member\/snap\/db is locked by a process this one cannot see \(another container, or another PID namespace\)\. .*stop that etcd first/,
        );
        expect(code).toBe(2);
        expect(await siblings('other-namespace')).toEqual(['data', 'etcd.log', 'wal']);
        // etcd still serves its data, which is where it was
        expect((await fetch(`${etcd.endpoint}/health`)).status).toBe(200);
      } finally {
        await etcd.stop();
      }
      // stopped, the same stale data is restored as usual: the lock is what refused, not anything else
      const { code, result } = await bootstrap(dataDir, ['--store', storeUrl, ...(await member()).flags]);
      expect(code).toBe(0);
      expect(result?.case).toBe('restore');
    },
  );

  it('row fresh: an empty data dir and an empty store start a new member', async () => {
    await mkdir(path('fresh', 'data'), { recursive: true });
    const { code, result } = await bootstrap(path('fresh', 'data'), ['--store', emptyStoreUrl]);
    expect(code).toBe(0);
    expect(result?.case).toBe('fresh');
    expect(result?.etcd?.initialClusterState).toBe('new');
    expect(await readdir(path('fresh', 'data'))).toEqual([]);
  });

  it('row restore: a corrupt db is moved aside (not deleted) and replaced from the store; --dry-run first touches nothing', async () => {
    const dataDir = await corrupt('corrupt');
    const damaged = await readFile(join(dataDir, 'member/snap/db'));
    const { peerPort, flags } = await member();

    const dry = await runProgram('etcd-validate', [
      'bootstrap',
      '--data-dir',
      dataDir,
      '--store',
      storeUrl,
      '--dry-run',
      ...flags,
    ]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(/^would restore: .*both bbolt meta pages/);
    expect(dry.stdout).toMatch(/would: move .* aside/);
    expect(await siblings('corrupt')).toEqual(['data']);
    expect(await readFile(join(dataDir, 'member/snap/db'))).toEqual(damaged);

    const { code, result } = await bootstrap(dataDir, ['--store', storeUrl, ...flags]);
    expect(code).toBe(0);
    expect(result?.case).toBe('restore');
    expect(result?.restored?.revision).toBe(stored.revision);
    const aside = (await siblings('corrupt')).filter((n) => n !== 'data');
    expect(aside).toHaveLength(1);
    expect(aside[0]).toMatch(/^data\.bad-\d{8}T\d{6}Z$/);
    expect(result?.movedAside).toBe(path('corrupt', aside[0]));
    expect(await readFile(path('corrupt', aside[0], 'member/snap/db'))).toEqual(damaged);

    const check = await runProgram('etcd-validate', ['check', '--data-dir', dataDir, '--mode', 'full'], {
      POD_NAMESPACE: '',
    });
    expect(check.code).toBe(0);
    const [restored] = await fingerprintRestored([{ name: 'm0', dataDir, peerPort }], {
      initialCluster: `m0=http://127.0.0.1:${peerPort}`,
      clusterToken: 'etcd-cluster',
    });
    expect(restored).toEqual(stored);
  });

  it('row restore: stale data (behind the store) and an empty data dir with a store that has data are restored', async () => {
    const stale = await copy('stale-copy', 'stale');
    const { peerPort, flags } = await member();
    const behind = await bootstrap(stale, ['--store', storeUrl, ...flags]);
    expect(behind.code).toBe(0);
    expect(behind.result?.case).toBe('restore');
    expect(behind.result?.reason).toMatch(/stale/);
    expect(behind.result?.movedAside).toMatch(/data\.bad-/);

    await mkdir(path('empty', 'data'), { recursive: true });
    const empty = await bootstrap(path('empty', 'data'), ['--store', storeUrl, ...flags]);
    expect(empty.code).toBe(0);
    expect(empty.result?.case).toBe('restore');
    expect(empty.result?.movedAside).toBeUndefined();
    expect(await siblings('empty')).toEqual(['data']);

    const fingerprints = await fingerprintRestored([{ name: 'm0', dataDir: stale, peerPort }], {
      initialCluster: `m0=http://127.0.0.1:${peerPort}`,
      clusterToken: 'etcd-cluster',
    });
    expect(fingerprints[0]).toEqual(stored);
    expect(empty.result?.restored).toEqual(behind.result?.restored);
  });

  it('row no-backup: bad data and an empty store: exit 3, nothing touched', async () => {
    const dataDir = await corrupt('no-backup');
    const { code, result } = await bootstrap(dataDir, ['--store', emptyStoreUrl]);
    expect(code).toBe(3);
    expect(result?.case).toBe('no-backup');
    expect(result?.reason).toMatch(/no full snapshot to restore it from: etcd must not start/);
    expect(await siblings('no-backup')).toEqual(['data']);
  });

  it('row wrong-volume: safe_guard names another namespace: exit 5, nothing touched', async () => {
    const dataDir = await corrupt('volume');
    await runProgram('etcd-validate', ['check', '--data-dir', dataDir], { POD_NAMESPACE: 'shoot--a' });
    const { code, result } = await bootstrap(dataDir, ['--store', storeUrl], { POD_NAMESPACE: 'shoot--b' });
    expect(code).toBe(5);
    expect(result?.case).toBe('wrong-volume');
    expect(await siblings('volume')).toEqual(['data', 'safe_guard']);
  });

  it('row cannot-decide: bad data and a store that cannot be listed: exit 6, nothing touched, no credential shown', async () => {
    const dataDir = await corrupt('store-down');
    const secret = 'bootstrap-test-secret-never-shown';
    const port = await freePort(); // nothing listens there
    const res = await bootstrap(dataDir, ['--store', `s3://backups/etcd?endpoint=http://127.0.0.1:${port}&retries=0`], {
      AWS_ACCESS_KEY_ID: 'bootstrap-test-key',
      AWS_SECRET_ACCESS_KEY: secret,
      AWS_REGION: 'us-east-1',
    });
    expect(res.code).toBe(6);
    expect(res.result?.case).toBe('cannot-decide');
    expect(res.result?.reason).toMatch(/the store could not be listed/);
    expect(res.stdout + res.stderr).not.toContain(secret);
    expect(await siblings('store-down')).toEqual(['data']);
  });

  it('bad usage exits 2 before any work', async () => {
    const dataDir = await corrupt('usage');
    const bad = [
      ['--store', storeUrl, '--mode', 'quick'],
      ['--store', 'nope://x'],
      ['--store', storeUrl, '--initial-cluster', 'a=http://127.0.0.1:1'],
      // several members and no --endpoints to ask the others
      ['--store', storeUrl, '--name', 'a', '--initial-cluster', 'a=http://127.0.0.1:1,b=http://127.0.0.1:2'],
    ];
    for (const args of bad) {
      const res = await bootstrap(dataDir, args);
      expect(res.code, args.join(' ')).toBe(2);
      expect(res.stderr).toMatch(/error/);
    }
    expect(await siblings('usage')).toEqual(['data']);
  });
});
