import { mkdir } from 'node:fs/promises';
import { LocalStore, listSnapshots } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { restoreAndFingerprint } from './restore-program.js';
import { runProgram } from './run-program.js';
import { chainProblems, keyspaceOnceStored, startSidecar, startWriter, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('compact-sidecar-');

it('runs beside the sidecar: its deltas go on after the compacted revision and the chain stays gap-free', async () => {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const storeUrl = `file://${at('store')}`;
  const store = new LocalStore(at('store'));
  const sidecar = await startSidecar({ endpoint: cluster.endpoints[0], store: storeUrl, dir: at('sidecar') });
  onTestFinished(() => sidecar.kill());
  const client = cluster.client();
  const writer = startWriter(client, { concurrency: 4 });
  try {
    const deltas = async () => (await listSnapshots(store)).filter((e) => e.kind === 'Incr');
    await waitFor('three deltas', async () => (await deltas()).length >= 3, 60_000);
    await mkdir(at('work'));
    const res = await runProgram('etcd-compact', ['--store', storeUrl, '--work-dir', at('work'), '--output', 'json']);
    expect(res.code, res.stderr).toBe(0);
    const compacted: { name: string; revision: number } = JSON.parse(res.stdout);
    await waitFor(
      'a delta after the compacted revision',
      async () => (await deltas()).some((d) => d.startRevision > compacted.revision),
      60_000,
    );
    await writer.stop();
    const source = await keyspaceOnceStored(client, sidecar.url);
    expect(await sidecar.stop()).toBe(0);

    expect(chainProblems(await listSnapshots(store))).toEqual([]);
    // the compacted full snapshot and the sidecar's deltas after it restore the newest state
    const { result, fingerprint } = await restoreAndFingerprint(storeUrl, at(), 'restored', [
      '--snapshot',
      compacted.name,
    ]);
    expect(result.snapshot).toBe(compacted.name);
    expect(result.deltas.length).toBeGreaterThan(0);
    expect(fingerprint).toEqual(source);
  } finally {
    await writer.stop().catch(() => {});
  }
});
