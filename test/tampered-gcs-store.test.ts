// One etcd version: what a versioned bucket keeps and how it is read back, which does not change with etcd's version.
/**
 * Snapshots deleted or overwritten in a GCS bucket with object versioning: GCS keeps what an overwrite or a delete
 * left as noncurrent generations. The restore reads through them to the newest generation that verifies and names
 * what it recovered; gc deletes every generation of what it deletes; a snapshot put over a stored one is refused.
 * Programs as processes, real etcd, GCS's JSON API (our store's client, and fetch for the attacker) against the test
 * server (test/servers/gcs-server.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { type KeyspaceFingerprint, keyspaceFingerprint, LocalStore, openStore } from '@etcd-steward/core';
import { buildChainStore, type ChainStore, startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RestoreOutput, restoreAndFingerprint } from './restore-program.js';
import { runProgram } from './run-program.js';
import { type GcsTestServer, startGcsServer } from './servers/gcs-server.js';

describe('a GCS bucket with object versioning whose snapshots were deleted or overwritten', () => {
  let cluster: TestCluster;
  let dir: string;
  let chain: ChainStore;
  let local: LocalStore;
  let server: GcsTestServer;
  let newest: KeyspaceFingerprint;
  const env = { GOOGLE_APPLICATION_CREDENTIALS: '', STORAGE_EMULATOR_HOST: '' };

  beforeAll(async () => {
    cluster = await startCluster();
    dir = await mkdtemp(join(tmpdir(), 'tampered-gcs-'));
    local = new LocalStore(join(dir, 'store'));
    chain = await buildChainStore(cluster.client(), cluster.endpoints, local, { tempDir: dir, keys: 600 });
    newest = await keyspaceFingerprint(cluster.client(), chain.lastRevision);
    server = await startGcsServer();
    server.createBucket('versioned');
    server.configureBucket('versioned', { versioning: true });
  });

  afterAll(async () => {
    await server?.stop();
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const storeUrl = (prefix: string) => `gs://versioned/${prefix}?endpoint=${encodeURIComponent(server.endpoint)}`;

  /** The chain's objects, with their metadata, written to `prefix` as the programs write them. */
  async function seed(prefix: string): Promise<string> {
    const url = storeUrl(prefix);
    const store = await openStore(url);
    for (const object of await local.list('v2/')) {
      const { metadata } = (await local.stat(object.name))!;
      await store.put(object.name, await local.get(object.name), { metadata });
    }
    return url;
  }

  // An attacker with the credentials the backups are written with, through GCS's JSON API.
  const api = (path: string, init?: RequestInit) => fetch(`${server.endpoint}${path}`, init);
  const objectPath = (prefix: string, name: string) =>
    `/storage/v1/b/versioned/o/${encodeURIComponent(`${prefix}/${name}`)}`;
  const deleteLive = (prefix: string, name: string) => api(objectPath(prefix, name), { method: 'DELETE' });
  const overwrite = (prefix: string, name: string, body: Buffer) =>
    api(`/upload/storage/v1/b/versioned/o?uploadType=media&name=${encodeURIComponent(`${prefix}/${name}`)}`, {
      method: 'POST',
      body: new Uint8Array(body),
    });
  /** The name's generations, newest first. */
  const generations = async (prefix: string, name: string): Promise<string[]> => {
    const res = await api(`/storage/v1/b/versioned/o?versions=true&prefix=${encodeURIComponent(`${prefix}/${name}`)}`);
    const { items = [] } = (await res.json()) as { items?: Array<{ generation: string }> };
    return items.map((i) => i.generation).sort((a, b) => Number(b) - Number(a));
  };

  it('restores exactly through a deleted full snapshot and a delta overwritten with garbage, and names both', async () => {
    const prefix = 'attacked';
    const url = await seed(prefix);
    const [, full] = chain.fulls;
    const delta = chain.deltas[1];
    const [fullGeneration] = await generations(prefix, full.name);
    const [deltaGeneration] = await generations(prefix, delta.name);
    expect((await deleteLive(prefix, full.name)).status).toBe(204);
    expect((await overwrite(prefix, delta.name, Buffer.alloc((await local.stat(delta.name))!.size, 7))).ok).toBe(true);

    const { result, fingerprint } = await restoreAndFingerprint(url, dir, prefix, [], env);
    expect(result.snapshot).toBe(full.name);
    expect((result as RestoreOutput & { recovered: unknown }).recovered).toEqual([
      { name: full.name, versionId: fullGeneration, why: expect.stringMatching(/hidden by a delete marker/) },
      { name: delta.name, versionId: deltaGeneration, why: expect.stringMatching(/current version does not verify/) },
    ]);
    expect(fingerprint).toEqual(newest);
  });

  it('gc deletes every generation of what it deletes, and a snapshot put over a stored one is refused', async () => {
    const prefix = 'gc';
    const url = await seed(prefix);
    const res = await runProgram('etcd-gc', ['--store', url, '--keep-last', '1', '--output', 'json'], env);
    expect(res.code, res.stderr).toBe(0);
    const deleted = JSON.parse(res.stdout).objects.filter((o: { result?: string }) => o.result === 'deleted');
    expect(deleted.map((o: { name: string }) => o.name)).toContain(chain.fulls[0].name);
    for (const { name } of deleted) expect(await generations(prefix, name)).toEqual([]);

    const store = await openStore(url);
    const [, full] = chain.fulls;
    await expect(store.put(full.name, Readable.from([Buffer.from('other bytes')]))).rejects.toThrow(
      /keeps noncurrent generations/,
    );
    expect(await generations(prefix, full.name)).toHaveLength(1);
  });
});
