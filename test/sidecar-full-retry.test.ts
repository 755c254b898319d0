// One etcd version: a full snapshot retried after the store refused it, which does not change with etcd's version.
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { metric, startSidecar, waitFor } from './sidecar-helpers.js';
import { switchableStore } from './switchable-store.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-full-retry-');

const fullsIn = async (dir: string) =>
  (await readdir(join(dir, 'v2')).catch(() => [] as string[])).filter((n) => n.startsWith('Full-')).length;

it('a requested full snapshot that failed is retried with backoff until one is stored: /healthz is 200 again and no full is owed, long before the next scheduled one', async () => {
  const store = await switchableStore(at, 'store');
  const real = await store.directory('real');
  await store.point(real);
  const away = at('away');
  await writeFile(away, 'the store is away'); // a file, which even root cannot write into
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  // The next scheduled full snapshot is months away: only a retry can store one during this test.
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: store.url,
    dir: at('sidecar'),
    args: ['--schedule', '0 0 1 1 *'],
  });
  onTestFinished(() => sidecar.kill());
  const { url } = sidecar;
  await waitFor('the full snapshot at start-up', async () => (await fullsIn(real)) === 1);
  await waitFor('the sidecar to be healthy', async () => (await fetch(`${url}/healthz`)).status === 200);

  await store.point(away);
  const requested = await fetch(`${url}/snapshot/full`, { method: 'POST' });
  expect(requested.status).toBe(500);
  expect((await fetch(`${url}/healthz`)).status).toBe(503);
  expect(await metric(url, 'etcdbr_snapshot_required', 'kind="Full"')).toBe(1);

  // The store comes back at once: the first retry is due within 10 s (backoff with full jitter, docs/sidecar.md).
  await store.point(real);
  await waitFor('a full snapshot retried into the store', async () => (await fullsIn(real)) === 2, 60_000);
  await waitFor('/healthz to be 200 again', async () => (await fetch(`${url}/healthz`)).status === 200, 30_000);
  expect(await metric(url, 'etcdbr_snapshot_required', 'kind="Full"')).toBe(0);
  expect(await sidecar.stop()).toBe(0);
  expect(await sidecar.log()).toMatch(/full snapshot failed; trying again.*retryInSeconds/);
});
