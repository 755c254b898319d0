// One etcd version: how a read-only store is named and counted, which does not change with etcd's version.
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmdirSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { runProgram } from './run-program.js';
import { metric, startSidecar, waitFor } from './sidecar-helpers.js';

/** Why a file system cannot be mounted here (not root, no CAP_SYS_ADMIN in this container), or undefined. */
function cannotMount(): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'mount-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'pipe' });
    execFileSync('umount', [dir]);
    return undefined;
  } catch (err) {
    return `cannot mount a tmpfs here: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`;
  } finally {
    rmdirSync(dir);
  }
}

const skip = cannotMount();
const SNAPSHOT_BIN = fileURLToPath(new URL('../packages/snapshot/bin/etcd-snapshot.js', import.meta.url));

/** The error line a program prints when stderr is not a terminal. */
const errorOf = (stderr: string) => JSON.parse(stderr.trim().split('\n').at(-1) ?? '{}').msg as string;

describe.skipIf(skip !== undefined)(`a store that refuses writes${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let work: string;
  /** Folders another user reaches. */
  let shared: string;
  /** A tmpfs of its own, remounted read-only and back by the tests. */
  let volume: string;
  let cluster: TestCluster;
  const remount = (mode: 'ro' | 'rw') => execFileSync('mount', ['-o', `remount,${mode}`, volume]);

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'store-read-only-'));
    // In /tmp itself: the other user of the permission test must reach its folders, and the run's TMPDIR (0700, as
    // scripts/test makes it) would stop it at the door.
    shared = await mkdtemp('/tmp/store-not-writable-');
    await chmod(shared, 0o755);
    volume = join(work, 'volume');
    await mkdir(volume);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', volume]);
    cluster = await startCluster();
  });

  afterAll(async () => {
    await cluster?.stop();
    if (volume) {
      try {
        execFileSync('umount', [volume], { stdio: 'pipe' });
      } catch {
        execFileSync('umount', ['-l', volume]); // something still holds it open: detach it all the same
      }
    }
    if (work) await rm(work, { recursive: true, force: true });
    if (shared) await rm(shared, { recursive: true, force: true });
  });

  it('etcd-snapshot save on a read-only mount: exit 1, the store named and said to be read-only, not a missing .tmp', async () => {
    const store = join(volume, 'save');
    await mkdir(store);
    remount('ro');
    try {
      const result = await runProgram('etcd-snapshot', [
        'save',
        '--endpoints',
        cluster.endpoints[0],
        '--store',
        `file://${store}`,
      ]);
      expect(result.code).toBe(1);
      expect(errorOf(result.stderr)).toBe(
        `the store file://${store} is read-only (EROFS): cannot write ${store}/.tmp: mount its volume read-write, or give a store this program may write to`,
      );
      expect(result.stderr).not.toMatch(/ENOENT/);
    } finally {
      remount('rw');
    }
    expect(await readdir(store)).toEqual([]);
  });

  it('etcd-snapshot save as a user without write permission: exit 1, the store named, permission denied and what to do', async () => {
    const store = join(shared, 'root-only');
    await mkdir(store, { mode: 0o755 }); // root's: uid 65532 (the image's user) may read it, not write it
    const scratch = join(shared, 'scratch-65532');
    await mkdir(scratch);
    await chmod(scratch, 0o777);
    const result = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        [
          SNAPSHOT_BIN,
          'save',
          '--endpoints',
          cluster.endpoints[0],
          '--store',
          `file://${store}`,
          '--temp-dir',
          scratch,
        ],
        { uid: 65532, gid: 65532, env: { ...process.env, HOME: scratch } },
        (err, _stdout, stderr) => resolve({ code: (err as { code?: number } | null)?.code ?? 0, stderr }),
      ),
    );
    expect(result.code).toBe(1);
    expect(errorOf(result.stderr)).toBe(
      `the store file://${store} cannot be written: permission denied (EACCES): cannot write ${store}/.tmp: give this program (uid 65532) write access to the store's folder`,
    );
    expect(await readdir(store)).toEqual([]);
  });

  it('the sidecar on a read-only store: etcd_snapshot_store_reachable 0 and the log says read-only; once writable again, 1 and healthy', async () => {
    const store = join(volume, 'sidecar');
    await mkdir(store);
    remount('ro');
    let readOnly = true;
    onTestFinished(() => {
      if (readOnly) remount('rw');
    });
    const sidecar = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: `file://${store}`,
      dir: join(work, 'sidecar'),
      args: ['--schedule', '0 0 1 1 *'],
    });
    onTestFinished(() => sidecar.kill());
    const { url } = sidecar;
    await waitFor(
      'the store to count as unreachable',
      async () => (await metric(url, 'etcd_snapshot_store_reachable')) === 0,
    );
    expect((await fetch(`${url}/healthz`)).status).toBe(503);
    expect(await metric(url, 'etcdbr_snapshot_required', 'kind="Full"')).toBe(1);
    const log = await sidecar.log();
    expect(log).toContain(`the store file://${store} is read-only (EROFS)`);
    expect(log).not.toMatch(/ENOENT/);

    remount('rw');
    readOnly = false;
    // The full snapshot is retried with backoff (a random wait below 10 s, then 20 s, …).
    await waitFor(
      'the store to be reachable again',
      async () => (await metric(url, 'etcd_snapshot_store_reachable')) === 1,
      90_000,
    );
    await waitFor('/healthz to be 200', async () => (await fetch(`${url}/healthz`)).status === 200);
    expect((await readdir(join(store, 'v2'))).filter((n) => n.startsWith('Full-'))).toHaveLength(1);
    expect(await sidecar.stop()).toBe(0);
  });
});
