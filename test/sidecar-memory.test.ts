import { readdir, readFile } from 'node:fs/promises';
import { LocalStore, listSnapshots } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it } from 'vitest';
import { firstDelta, metric, type SidecarProcess, startSidecar, startWriter, waitFor } from './sidecar-helpers.js';
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

/** The processes the sidecar has started, now. */
async function childrenOf(pid: number): Promise<string[]> {
  const tasks = await readdir(`/proc/${pid}/task`).catch(() => []);
  const lists = await Promise.all(
    tasks.map((t) => readFile(`/proc/${pid}/task/${t}/children`, 'utf8').catch(() => '')),
  );
  return lists.flatMap((list) => list.split(' ').filter(Boolean));
}

/** A process's anonymous resident memory in MiB (heap, buffers, malloc): what a pod's memory limit cannot reclaim. */
const anonMib = async (pid: number) =>
  Number(/RssAnon:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

it('takes a full snapshot in its own process: no second Node runtime for the pod to count, a few MB over its own memory, nothing left in its scratch space', async () => {
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
    const store = new LocalStore(at('store-full'));
    sidecar = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: `file://${at('store-full')}`,
      dir: at('full'),
    });
    const url = sidecar.url;
    const pid = sidecar.child.pid!;
    await waitFor(
      'the first full snapshot',
      async () => ((await metric(url, 'etcdbr_snapshot_latest_revision', 'kind="Full"')) ?? 0) > 0,
    );
    const fullsBefore = (await listSnapshots(store)).filter((e) => e.kind === 'Full');
    const before = await anonMib(pid);

    let done = false;
    const response = fetch(`${url}/snapshot/full`, { method: 'POST' }).finally(() => (done = true));
    const children = new Set<string>();
    let peak = before;
    while (!done) {
      for (const child of await childrenOf(pid)) children.add(child);
      peak = Math.max(peak, await anonMib(pid));
      await new Promise((r) => setTimeout(r, 10));
    }
    expect((await response).status).toBe(200);
    expect([...children]).toEqual([]);
    // A child process with a Node runtime of its own added ~25 MB of anonymous memory while it ran.
    expect(peak - before).toBeLessThan(20);
    const fulls = (await listSnapshots(store)).filter((e) => e.kind === 'Full');
    expect(fulls.length).toBe(fullsBefore.length + 1);
    const scratch = at('full', 'spool', 'tmp');
    for (const own of await readdir(scratch)) expect(await readdir(`${scratch}/${own}`)).toEqual([]);
    expect(await sidecar.stop()).toBe(0);
    sidecar = undefined;
  } finally {
    await sidecar?.kill();
    await cluster.stop();
  }
});
