import { once } from 'node:events';
import { readdir, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
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
async function sidecarWithoutEtcd(name: string, args: string[] = []) {
  const sidecar = await startSidecar({
    endpoint: `http://127.0.0.1:${await freePort()}`,
    store: `file://${at(`${name}-store`)}`,
    dir: at(name),
    args,
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

/** A GET on a connection of its own (no keep-alive pool): status, Retry-After and body. */
function getAlone(url: string) {
  return new Promise<{ status: number; retryAfter?: string; body: unknown }>((resolve, reject) =>
    request(url, { agent: false }, async (res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of res) chunks.push(chunk as Buffer);
      resolve({
        status: res.statusCode ?? 0,
        retryAfter: res.headers['retry-after'],
        body: JSON.parse(Buffer.concat(chunks).toString()),
      });
    })
      .on('error', reject)
      .end(),
  );
}

it('past --server-max-connections, a request gets 503 with Retry-After, /healthz its own answer; once they close, it is served', async () => {
  const sidecar = await sidecarWithoutEtcd('connections', ['--server-max-connections', '2']);
  const { port } = new URL(sidecar.url);
  const idle: Socket[] = [];
  onTestFinished(() => {
    for (const socket of idle) socket.destroy();
  });
  for (let i = 0; i < 2; i++) {
    const socket = connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    idle.push(socket);
  }
  expect(await getAlone(`${sidecar.url}/snapshot/latest`)).toEqual({
    status: 503,
    retryAfter: '5',
    body: { error: 'the server has 2 connections open (--server-max-connections)' },
  });
  // The probe is answered as ever: here 503 because etcd is down, with the health body, not the cap's.
  expect(await getAlone(`${sidecar.url}/healthz`)).toEqual({ status: 503, body: { health: false } });
  for (const socket of idle.splice(0)) socket.destroy();
  await waitFor(
    'the idle connections to close',
    async () => (await getAlone(`${sidecar.url}/snapshot/latest`)).status === 200,
  );
  expect(await sidecar.stop()).toBe(0);
});

it("final snapshot requests share one snapshot, and one within 30 s of the last gets 429 with Retry-After; /snapshot/latest lists the store every few seconds, but shows the sidecar's own snapshots at once", async () => {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  await cluster.client().put('/k').value('v');
  const storeDir = at('final-store');
  const sidecar = await startSidecar({ endpoint: cluster.endpoints[0], store: `file://${storeDir}`, dir: at('final') });
  onTestFinished(() => sidecar.kill());
  const { url } = sidecar;
  await waitFor('the start-up full snapshot', async () => (await fullsTaken(url)) >= 1);
  const finals = async () => (await readdir(join(storeDir, 'v2'))).filter((name) => name.endsWith('.final'));

  const answers = await Promise.all(Array.from({ length: 3 }, () => fetch(`${url}/snapshot/full?final=true`)));
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
  const bodies = (await Promise.all(answers.map((a) => a.json()))) as { snapName: string; isFinal: boolean }[];
  expect(new Set(bodies.map((b) => b.snapName)).size).toBe(1);
  expect(bodies[0].isFinal).toBe(true);
  expect(await finals()).toEqual([bodies[0].snapName]);

  const again = await fetch(`${url}/snapshot/full?final=true`);
  expect(again.status).toBe(429);
  expect(Number(again.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(Number(again.headers.get('retry-after'))).toBeLessThanOrEqual(30);
  expect(await again.json()).toEqual({
    error: expect.stringMatching(/final full snapshot was taken less than 30 s ago/),
  });
  expect(await finals()).toHaveLength(1);

  // Another writer's snapshot shows once the listing is a few seconds old, not at once.
  type Latest = {
    fullSnapshot: { snapName: string; lastRevision: number };
    deltaSnapshots: { snapName: string }[] | null;
  };
  const latest = async () => (await (await fetch(`${url}/snapshot/latest`)).json()) as Latest;
  const before = await latest();
  const revision = before.fullSnapshot.lastRevision;
  const foreign = `Incr-${String(revision + 1).padStart(8, '0')}-${String(revision + 3).padStart(8, '0')}-${Math.floor(Date.now() / 1000)}.zst`;
  await writeFile(join(storeDir, 'v2', foreign), 'not read');
  expect(await latest()).toEqual(before);
  await waitFor(
    'the listing to be renewed',
    async () => (await latest()).deltaSnapshots?.some((d) => d.snapName === foreign),
    15_000,
  );
  await rm(join(storeDir, 'v2', foreign));

  const full = await fetch(`${url}/snapshot/full`, { method: 'POST' });
  expect(full.status).toBe(200);
  const { snapName } = (await full.json()) as { snapName: string };
  expect(await latest()).toMatchObject({ fullSnapshot: { snapName }, deltaSnapshots: null });
  expect(await sidecar.stop()).toBe(0);
});
