import { LocalStore, listSnapshots } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it } from 'vitest';
import {
  chainProblems,
  expectRestored,
  keyspaceOnceStored,
  type SidecarProcess,
  startSidecar,
  startWriter,
} from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-kill-');

it('SIGKILL at random moments, 12 times, never leaves a gap or an overlap in the chain', async () => {
  const cluster = await startCluster();
  const storeDir = at('store');
  const sidecarDir = at('sidecar');
  const start = () => startSidecar({ endpoint: cluster.endpoints[0], store: `file://${storeDir}`, dir: sidecarDir });
  let sidecar: SidecarProcess | undefined;
  // A fixed seed: a failure can be replayed with the same moments.
  let seed = 20261122;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  try {
    const client = cluster.client();
    const writer = startWriter(client, { concurrency: 1 }); // slow enough that the restore replays in seconds
    const moments: number[] = [];
    for (let i = 0; i < 12; i++) {
      sidecar = await start();
      // Moments from just after start-up (resync, first full snapshot) to mid-upload of later deltas.
      const ms = Math.round(100 + random() * 1900);
      moments.push(ms);
      await new Promise((r) => setTimeout(r, ms));
      await sidecar.kill();
    }
    sidecar = await start();
    await new Promise((r) => setTimeout(r, 1_500));
    const written = await writer.stop();
    const source = await keyspaceOnceStored(client, sidecar.url);
    console.log(
      `killed after ${moments.join(', ')} ms; writer: ${written.perSecond}/s, last revision ${source.revision}`,
    );
    expect(await sidecar.stop()).toBe(0);
    sidecar = undefined;

    const store = new LocalStore(storeDir);
    const entries = await listSnapshots(store);
    expect(chainProblems(entries)).toEqual([]);
    expect(entries.filter((e) => e.kind === 'Incr').length).toBeGreaterThan(5);
    await expectRestored(store, at('restore'), source);
  } finally {
    await sidecar?.kill();
    await cluster.stop();
  }
});
