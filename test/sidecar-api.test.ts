import { freePort } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { metric, startSidecar, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-api-');

/** Full snapshots the sidecar has stored since it started, by its metrics. */
const fullsTaken = async (url: string) =>
  (await metric(url, 'etcdbr_snapshot_duration_seconds_count', 'kind="Full",succeeded="true"')) ?? 0;

it('full snapshot requests that come while one is queued or running share it, even when clients hang up', async () => {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const client = cluster.client();
  for (let i = 0; i < 200; i++) await client.put(`/k/${i}`).value('v'.repeat(1000));
  const sidecar = await startSidecar({ endpoint: cluster.endpoints[0], store: `file://${at('store')}`, dir: at('s') });
  onTestFinished(() => sidecar.kill());
  const { url } = sidecar;
  await waitFor('the start-up full snapshot', async () => (await fullsTaken(url)) === 1);

  const hangingUp = Array.from({ length: 4 }, () =>
    fetch(`${url}/snapshot/full`, { method: 'POST', signal: AbortSignal.timeout(5) }).catch(() => undefined),
  );
  const waiting = Array.from({ length: 4 }, () => fetch(`${url}/snapshot/full`, { method: 'POST' }));
  const answers = await Promise.all(waiting);
  await Promise.all(hangingUp);
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
  const names = new Set(
    await Promise.all(answers.map(async (a) => ((await a.json()) as { snapName: string }).snapName)),
  );
  expect(names.size).toBe(1);
  // Queued snapshots of the clients that hung up would still be running now.
  await new Promise((r) => setTimeout(r, 1_000));
  expect(await fullsTaken(url)).toBe(2);

  // Once it is done, a new request takes a new snapshot.
  expect((await fetch(`${url}/snapshot/full`, { method: 'POST' })).status).toBe(200);
  expect(await fullsTaken(url)).toBe(3);
  expect(await sidecar.stop()).toBe(0);
});

/** A sidecar whose etcd does not answer (nothing listens on its port), on an empty store. */
async function sidecarWithoutEtcd(name: string) {
  const sidecar = await startSidecar({
    endpoint: `http://127.0.0.1:${await freePort()}`,
    store: `file://${at(`${name}-store`)}`,
    dir: at(name),
  });
  onTestFinished(() => sidecar.kill());
  return sidecar;
}

it('with etcd unreachable and an empty store, /healthz says 503 and the metrics say a full snapshot is required', async () => {
  const sidecar = await sidecarWithoutEtcd('required');
  expect((await fetch(`${sidecar.url}/healthz`)).status).toBe(503);
  expect(await metric(sidecar.url, 'etcdbr_snapshot_required', 'kind="Full"')).toBe(1);
  expect(await sidecar.stop()).toBe(0);
});

it('with the leader unknown, snapshot requests get 503 with the leader (null) and Retry-After', async () => {
  const sidecar = await sidecarWithoutEtcd('unknown-leader');
  for (const path of ['/snapshot/full', '/snapshot/delta']) {
    const answer = await fetch(`${sidecar.url}${path}`, { method: 'POST' });
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toMatch(/^\d+$/);
    const body = (await answer.json()) as { error: string; leader: unknown };
    expect(body.leader).toBeNull();
    expect(body.error).toMatch(/leader is not known/);
  }
  expect(await sidecar.stop()).toBe(0);
});
