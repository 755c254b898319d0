import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { takeFullSnapshot } from '../src/backup/take-full-snapshot.js';
import { LocalStore } from '../src/store/local.js';

const run = promisify(execFile);

describe('etcd with auth enabled', () => {
  let cluster: TestCluster;
  let dir: string;
  const etcdctl = (...args: string[]) =>
    run('etcdctl', ['--endpoints', cluster.endpoints[0], ...args], { env: { ...process.env, ETCDCTL_API: '3' } });

  beforeAll(async () => {
    cluster = await startCluster();
    dir = await mkdtemp(join(tmpdir(), 'etcd-auth-'));
    await etcdctl('put', '/before-auth', 'x');
    await etcdctl('user', 'add', 'root:root-pw');
    await etcdctl('user', 'grant-role', 'root', 'root');
    await etcdctl('auth', 'enable');
  });

  afterAll(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('snapshots with a user (the general gRPC client drops the token on this call)', async () => {
    const connection = { endpoints: cluster.endpoints, username: 'root', password: 'root-pw' };
    const saved = await takeFullSnapshot({
      connection,
      store: new LocalStore(join(dir, 'store')),
      compression: 'zstd',
      tempDir: dir,
    });
    expect(saved.revision).toBe(2);
  });

  it('names the problem without the password when auth fails', async () => {
    const attempt = takeFullSnapshot({
      connection: { endpoints: cluster.endpoints, username: 'root', password: 'wrong-secret' },
      store: new LocalStore(join(dir, 'store2')),
      compression: 'zstd',
      tempDir: dir,
    });
    await expect(attempt).rejects.toThrow(/etcd refused user root: .*authentication failed/);
    await expect(attempt).rejects.not.toThrow(/wrong-secret/);
    await expect(
      takeFullSnapshot({
        connection: { endpoints: cluster.endpoints },
        store: new LocalStore(join(dir, 's3')),
        compression: 'zstd',
        tempDir: dir,
      }),
    ).rejects.toThrow(/user name is empty|permission denied|token/i);
  });
});
