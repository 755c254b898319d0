import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findEtcdBinaries } from '../src/etcd/etcd-binaries.js';
import { EtcdProcess } from '../src/etcd/spawned-etcd.js';

describe('a spawned etcd (real etcd)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'spawned-etcd-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("is configured by its arguments alone: the caller's ETCD_* variables, which etcd reads as flags, do not reach it", async () => {
    const etcd = await EtcdProcess.start({
      binaries: await findEtcdBinaries(),
      name: 'm0',
      dataDir: join(dir, 'm0'),
      logFile: join(dir, 'm0.log'),
      throwaway: true,
      // What a user's or a container's environment may hold: each alone stops etcd at start-up.
      env: { ...process.env, ETCD_VERSION: '3.5', ETCD_DATA_DIR: join(dir, 'elsewhere'), ETCD_NAME: 'other' },
    });
    try {
      await etcd.waitHealthy();
      expect((await etcd.keyCount()).revision).toBe(1);
    } finally {
      await etcd.stop();
    }
  });
});
