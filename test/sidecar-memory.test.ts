import { readFile } from 'node:fs/promises';
import { startCluster } from '@etcd-steward/testing';
import { expect, it } from 'vitest';
import { firstDelta, metric, type SidecarProcess, startSidecar, startWriter } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-memory-');

/** What `ps` shows of the process the test started: its command line and environment. */
const processOf = async (sidecar: SidecarProcess) => ({
  args: (await readFile(`/proc/${sidecar.child.pid}/cmdline`, 'utf8')).split('\0'),
  env: (await readFile(`/proc/${sidecar.child.pid}/environ`, 'utf8')).split('\0'),
});

it('runs with a small young generation and one malloc arena however it is started, in the process it was started as, unless the user chose otherwise', async () => {
  const cluster = await startCluster();
  let sidecar: SidecarProcess | undefined;
  try {
    // Started as `node bin/etcd-snapshot.js run …`, which no shebang can change.
    sidecar = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: `file://${at('store')}`,
      dir: at('a'),
    });
    const started = await processOf(sidecar);
    expect(started.args).toContain('--max-semi-space-size=4');
    expect(started.env).toContain('MALLOC_ARENA_MAX=1');
    const writer = startWriter(cluster.client(), { concurrency: 32, valueSize: 1000 });
    let newSpace = 0;
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline) {
      newSpace = Math.max(
        newSpace,
        (await metric(sidecar.url, 'nodejs_heap_space_size_total_bytes', 'space="new"')) ?? 0,
      );
      await new Promise((r) => setTimeout(r, 100));
    }
    await writer.stop();
    await firstDelta(sidecar.url, 'a delta');
    expect(newSpace).toBeGreaterThan(0);
    expect(newSpace).toBeLessThanOrEqual(8.5 * 2 ** 20); // two 4 MiB semi-spaces
    expect(await sidecar.stop()).toBe(0);

    sidecar = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: `file://${at('store')}`,
      dir: at('b'),
      env: { ...process.env, NODE_OPTIONS: '--max-semi-space-size=16', MALLOC_ARENA_MAX: '2' },
    });
    const chosen = await processOf(sidecar);
    expect(chosen.args.join(' ')).not.toMatch(/semi-space/);
    expect(chosen.env).toContain('MALLOC_ARENA_MAX=2');
    expect(await sidecar.stop()).toBe(0);
    sidecar = undefined;
  } finally {
    await sidecar?.kill();
    await cluster.stop();
  }
});
