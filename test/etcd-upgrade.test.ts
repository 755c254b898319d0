import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { dbEtcdVersion, freePort, type KeyspaceFingerprint } from '@etcd-steward/core';
import { etcdBinDir, fingerprintRestored, startCluster, withEtcdOnPath, writeWorkload } from '@etcd-steward/testing';
import { describe, expect, it, onTestFinished } from 'vitest';
import { runProgram } from './run-program.js';
import { keyspaceOnceStored, startSidecar } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

/** A restore for member r0 with the etcd tools of `version` first on PATH. */
async function restoreWith(version: '3.4' | '3.5', store: string, dataDir: string) {
  const peerPort = await freePort();
  const result = await runProgram(
    'etcd-restore',
    [
      ...['--store', store, '--data-dir', dataDir, '--name', 'r0'],
      ...['--initial-advertise-peer-urls', `http://127.0.0.1:${peerPort}`, '--output', 'json'],
    ],
    withEtcdOnPath(version),
  );
  return { ...result, peerPort };
}

describe('across the etcd 3.4 → 3.5 upgrade (programs as processes, real etcd of both versions)', () => {
  const dir = tempDir('etcd-upgrade-');

  it('a store the sidecar wrote against etcd 3.4 restores for an etcd 3.5 member, laid out by etcdutl', async () => {
    const cluster = await startCluster({ binDir: etcdBinDir('3.4') });
    onTestFinished(() => cluster.stop());
    const store = `file://${dir('from-3.4', 'store')}`;
    const client = cluster.client();
    await writeWorkload(client, { keys: 3_000, valueSize: 100 });
    const sidecar = await startSidecar({ endpoint: cluster.endpoints[0], store, dir: dir('from-3.4', 'sidecar') });
    let source: KeyspaceFingerprint;
    try {
      await writeWorkload(client, { keys: 1_000, valueSize: 100, seed: 2, prefix: '/after-full/' });
      source = await keyspaceOnceStored(client, sidecar.url);
    } finally {
      await sidecar.stop();
    }

    const dataDir = dir('from-3.4', 'restored');
    const restored = await restoreWith('3.5', store, dataDir);
    expect(restored.stderr).not.toMatch(/"level":"error"/);
    expect(restored.code).toBe(0);
    const result = JSON.parse(restored.stdout);
    expect(result.revision).toBe(source.revision);
    expect(result.deltas.length).toBeGreaterThan(0);
    // etcdutl (3.5) laid the member out: its db carries 3.5's consistent-index term.
    expect(dbEtcdVersion(join(dataDir, 'member', 'snap', 'db'))).toEqual({ major: 3, minor: 5 });

    const [fingerprint] = await fingerprintRestored([{ name: 'r0', dataDir, peerPort: restored.peerPort }], {
      initialCluster: `r0=http://127.0.0.1:${restored.peerPort}`,
      clusterToken: 'etcd-cluster',
      binDir: etcdBinDir('3.5'),
    });
    expect(fingerprint).toEqual(source);
  });

  it("refuses to restore an etcd 3.5 cluster's snapshot with etcd 3.4's tools, touching nothing", async () => {
    const cluster = await startCluster({ binDir: etcdBinDir('3.5') });
    onTestFinished(() => cluster.stop());
    const store = `file://${dir('from-3.5', 'store')}`;
    await writeWorkload(cluster.client(), { keys: 500, valueSize: 100 });
    const saved = await runProgram('etcd-snapshot', ['save', '--endpoints', cluster.endpoints[0], '--store', store]);
    expect(saved.code).toBe(0);

    const dataDir = dir('from-3.5', 'restored');
    const refused = await restoreWith('3.4', store, dataDir);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/taken from etcd 3\.5 and the etcd in use is 3\.4\.\d+/);
    expect(refused.stderr).toMatch(/Put etcd 3\.5's etcd and etcdutl first on PATH/);
    expect(existsSync(dataDir)).toBe(false);
  });
});
