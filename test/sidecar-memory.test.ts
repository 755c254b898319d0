import { readdir, readFile } from 'node:fs/promises';
import { LocalStore, listSnapshots } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it } from 'vitest';
import {
  etcdRevision,
  firstDelta,
  metric,
  type SidecarProcess,
  startSidecar,
  startWriter,
  waitFor,
} from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-memory-');

/** What `ps` shows of the process the test started: its command line and environment. */
const processOf = async (sidecar: SidecarProcess) => ({
  args: (await readFile(`/proc/${sidecar.child.pid}/cmdline`, 'utf8')).split('\0'),
  env: (await readFile(`/proc/${sidecar.child.pid}/environ`, 'utf8')).split('\0'),
});

it('runs with a small young generation, no TurboFan and one malloc arena however it is started, in the process it was started as, unless the user chose otherwise', async () => {
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
    expect(started.args).toContain('--max-semi-space-size=2');
    expect(started.args).toContain('--max-opt=2');
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
    expect(newSpace).toBeLessThanOrEqual(4.5 * 2 ** 20); // two 2 MiB semi-spaces
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

/** The sidecar's child process that takes a full snapshot, while one runs. */
async function snapshotProcessOf(sidecar: SidecarProcess): Promise<number | undefined> {
  const pid = sidecar.child.pid;
  for (const task of await readdir(`/proc/${pid}/task`)) {
    const children = (await readFile(`/proc/${pid}/task/${task}/children`, 'utf8').catch(() => ''))
      .split(' ')
      .filter(Boolean);
    for (const child of children) {
      const args = await readFile(`/proc/${child}/cmdline`, 'utf8').catch(() => '');
      if (args.includes('isolated-snapshot-process')) return Number(child);
    }
  }
  return undefined;
}

it('takes a full snapshot in a child process of its own: killed midway, that snapshot fails with nothing stored or left in its scratch space, and the next one is stored', async () => {
  const cluster = await startCluster();
  let sidecar: SidecarProcess | undefined;
  try {
    const client = cluster.client();
    const value = 'v'.repeat(1000);
    // ~20 MB: a snapshot that streams for a moment
    for (let b = 0; b < 200; b++)
      await client.kv.txn({
        compare: [],
        success: Array.from({ length: 100 }, (_, j) => ({
          request_put: { key: Buffer.from(`/k/${b}/${j}`), value: Buffer.from(value) },
        })),
        failure: [],
      });
    const store = new LocalStore(at('store-kill'));
    sidecar = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: `file://${at('store-kill')}`,
      dir: at('kill'),
    });
    const url = sidecar.url;
    await waitFor(
      'the first full snapshot',
      async () => ((await metric(url, 'etcdbr_snapshot_latest_revision', 'kind="Full"')) ?? 0) > 0,
    );
    const fullsBefore = (await listSnapshots(store)).filter((e) => e.kind === 'Full');

    const response = fetch(`${url}/snapshot/full`, { method: 'POST' });
    const child = await waitFor("the full snapshot's process", () => snapshotProcessOf(sidecar!), 30_000);
    expect(child).not.toBe(sidecar.child.pid);
    process.kill(child, 'SIGKILL');
    const failed = await response;
    expect(failed.status).toBeGreaterThanOrEqual(500);
    expect(await failed.text()).toMatch(/full snapshot's process ended unexpectedly \(SIGKILL\)/);
    expect((await listSnapshots(store)).filter((e) => e.kind === 'Full')).toEqual(fullsBefore);
    const scratch = at('kill', 'spool', 'tmp');
    for (const own of await readdir(scratch)) expect(await readdir(`${scratch}/${own}`)).toEqual([]);

    const revision = await etcdRevision(client);
    const stored = await fetch(`${url}/snapshot/full`, { method: 'POST' });
    expect(stored.status).toBe(200);
    const fulls = (await listSnapshots(store)).filter((e) => e.kind === 'Full');
    expect(fulls.length).toBe(fullsBefore.length + 1);
    expect(fulls.at(-1)!.lastRevision).toBeGreaterThanOrEqual(revision);
    // The child sends its result, then ends: it may take a moment after the response, but it goes.
    await waitFor(
      'the full snapshot process to end',
      async () => (await snapshotProcessOf(sidecar!)) === undefined,
      10_000,
    );
    expect(await sidecar.stop()).toBe(0);
    sidecar = undefined;
  } finally {
    await sidecar?.kill();
    await cluster.stop();
  }
});
