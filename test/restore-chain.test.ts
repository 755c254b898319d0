import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, type KeyspaceFingerprint, keyspaceFingerprint, LocalStore } from '@etcd-steward/core';
import {
  buildChainStore,
  type ChainStore,
  fingerprintRestored,
  startCluster,
  type TestCluster,
} from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ebrLocalListing } from './ebr-local-listing.js';
import { runProgram } from './run-program.js';

/**
 * Chains made by hand from a real etcd (full snapshots via takeFullSnapshot, deltas from a watch of the same
 * etcd), restored by the program; each result must match the source's fingerprint at the same revision.
 */
describe('etcd-restore of full + delta chains (programs as processes, real etcd)', () => {
  let cluster: TestCluster;
  let dir: string;
  let storeUrl: string;
  let chain: ChainStore;
  let midRevision: number;
  const source = new Map<number, KeyspaceFingerprint>();

  beforeAll(async () => {
    cluster = await startCluster();
    dir = await mkdtemp(join(tmpdir(), 'restore-chain-'));
    const store = new LocalStore(join(dir, 'store'));
    storeUrl = `file://${join(dir, 'store')}`;
    const client = cluster.client();
    chain = await buildChainStore(client, cluster.endpoints, store, { tempDir: dir, keys: 1200 });
    midRevision = chain.deltas[1].startRevision + 7;
    for (const revision of [chain.lastRevision, midRevision])
      source.set(revision, await keyspaceFingerprint(client, revision));
  });

  afterAll(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  async function restoreOne(name: string, extra: string[] = []) {
    const peerPort = await freePort();
    const peer = `http://127.0.0.1:${peerPort}`;
    const dataDir = join(dir, name);
    const res = await runProgram('etcd-restore', [
      '--store',
      storeUrl,
      '--data-dir',
      dataDir,
      '--name',
      'r0',
      '--initial-advertise-peer-urls',
      peer,
      '--initial-cluster-token',
      name,
      '--output',
      'json',
      ...extra,
    ]);
    expect(res.stderr).not.toMatch(/"level":"error"/);
    expect(res.code).toBe(0);
    const [fingerprint] = await fingerprintRestored([{ name: 'r0', dataDir, peerPort }], {
      initialCluster: `r0=${peer}`,
      clusterToken: name,
    });
    return { result: JSON.parse(res.stdout), fingerprint, stderr: res.stderr };
  }

  it('restores the newest revision: the newest full and the deltas after it, verified without etcd', async () => {
    const { result, fingerprint, stderr } = await restoreOne('latest');
    expect(result).toMatchObject({ revision: chain.lastRevision, snapshot: chain.fulls[1].name, skipped: [] });
    expect(result.deltas).toEqual(chain.deltas.slice(1).map((d) => d.name));
    expect(fingerprint).toEqual(source.get(chain.lastRevision));
    // the default verification read the keyspace from the db file: what etcd serves, from the source and the result
    expect(result).toMatchObject({ verify: 'check', fingerprint: source.get(chain.lastRevision) });
    expect(stderr).toMatch(/"msg":"verifying the result","revision":\d+,"verify":"check"/);
    // progress lines (JSON, stderr not a terminal) and a summary with the peak memory
    expect(stderr).toMatch(/"level":"progress","msg":"replay","revision":\d+/);
    expect(result.peakRssBytes).toBeGreaterThan(0);
    expect(result.keys).toBe(fingerprint.keys);
    expect((await readdir(dir)).filter((f) => f.startsWith('.'))).toEqual([]);
  });

  it("leaves ebr's Local provider nothing but the snapshots to list (metadata and a killed writer's temp file beside them)", async () => {
    const storeDir = join(dir, 'store');
    await mkdir(join(storeDir, '.tmp'), { recursive: true });
    await writeFile(join(storeDir, '.tmp', '0123456789abcdef.part'), 'half a snapshot');
    expect((await readdir(join(storeDir, '.metadata'))).length).toBeGreaterThan(0);
    expect(await ebrLocalListing(storeDir)).toEqual([...chain.fulls, ...chain.deltas].map((s) => s.name).sort());
  });

  it('restores exactly a revision in the middle of a delta (--to-revision), by the gRPC replay, verified by etcd', async () => {
    const { result, fingerprint } = await restoreOne('to-revision', [
      '--to-revision',
      String(midRevision),
      '--replay',
      'grpc',
      '--verify',
      'etcd',
    ]);
    expect(result).toMatchObject({ revision: midRevision, replay: 'grpc', verify: 'etcd' });
    expect(result.fingerprint).toBeUndefined();
    expect(fingerprint).toEqual(source.get(midRevision));
  });

  it('restores the state at a moment (--to-time), by the times recorded with the events', async () => {
    const moment = new Date(chain.timeOf(midRevision).getTime() + 500).toISOString().replace('Z', '000001Z');
    // the dry run reaches the revision the restore reaches, and shows the time to the nanosecond, as compared
    const args = ['--store', storeUrl, '--data-dir', join(dir, 'to-time-plan'), '--to-time', moment, '--dry-run'];
    const plan = await runProgram('etcd-restore', [...args, '--output', 'json']);
    expect(plan.code).toBe(0);
    expect(JSON.parse(plan.stdout)).toMatchObject({
      target: { revision: midRevision, time: moment },
      chains: [{ reaches: midRevision }, { reaches: midRevision }],
    });
    const text = await runProgram('etcd-restore', args);
    expect(text.stdout).toContain(`plan: restore the state at ${moment} from ${storeUrl}`);
    expect(text.stdout).toContain(`chain: reaches revision ${midRevision}, `);

    const { result, fingerprint } = await restoreOne('to-time', ['--to-time', moment]);
    expect(result.revision).toBe(midRevision);
    expect(fingerprint).toEqual(source.get(midRevision));
  });

  it('restores three members with their own names and peer URLs; started together they serve the same keyspace', async () => {
    const names = ['m0', 'm1', 'm2'];
    const ports = [await freePort(), await freePort(), await freePort()];
    const initialCluster = names.map((n, i) => `${n}=http://127.0.0.1:${ports[i]}`).join(',');
    const members = names.map((name, i) => ({ name, dataDir: join(dir, `member-${name}`), peerPort: ports[i] }));
    const runs = await Promise.all(
      members.map((m) =>
        runProgram('etcd-restore', [
          '--store',
          storeUrl,
          '--data-dir',
          m.dataDir,
          '--name',
          m.name,
          '--initial-cluster',
          initialCluster,
          '--initial-advertise-peer-urls',
          `http://127.0.0.1:${m.peerPort}`,
          '--initial-cluster-token',
          'three',
        ]),
      ),
    );
    for (const res of runs) {
      expect(res.code).toBe(0);
      expect(res.stdout).toContain(`at revision ${chain.lastRevision}`);
    }
    const fingerprints = await fingerprintRestored(members, { initialCluster, clusterToken: 'three' });
    expect(fingerprints).toEqual([0, 1, 2].map(() => source.get(chain.lastRevision)));
  });
});
