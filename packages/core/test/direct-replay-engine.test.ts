import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildChainStore, type ChainStore, startCluster, type TestCluster } from '@etcd-steward/testing';
import type { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listSnapshots } from '../src/backup/snapshot-catalog.js';
import { planChains } from '../src/backup/snapshot-chain.js';
import { BboltReader, bucketValue } from '../src/bbolt/bbolt-file.js';
import { findEtcdBinaries } from '../src/etcd/etcd-binaries.js';
import { keyspaceFingerprint } from '../src/etcd/keyspace-fingerprint.js';
import { layOutMemberDataDir } from '../src/etcd/member-layout.js';
import { inspectDataDir, inspectSnapshotFile } from '../src/etcd/snapshot-inspection.js';
import { runSnapshotRestore } from '../src/etcd/snapshot-restore-command.js';
import { type EarlyBase, storeSource } from '../src/replay/chain-source.js';
import { DirectReplayEngine } from '../src/replay/direct-replay-engine.js';
import { replayChain } from '../src/replay/replay-chain.js';
import { BaseNotAsPreparedError, type ReplayEngine } from '../src/replay/replay-engine.js';
import { GrpcReplayEngine } from '../src/replay/replay-events.js';
import { LocalStore } from '../src/store/local.js';

/** The names of the buckets in a db or snapshot file. */
function bucketNames(file: string): string[] {
  const fd = openSync(file, 'r');
  try {
    const reader = new BboltReader(fd);
    return [...reader.elements({ root: reader.meta.root, sequence: 0n })].map((e) => e.key.toString());
  } finally {
    closeSync(fd);
  }
}

/** The rows of a bucket in a db or snapshot file (db plus trailer), as [key, value] hex pairs. */
function bucketRows(file: string, name: string): string[][] {
  const fd = openSync(file, 'r');
  try {
    const reader = new BboltReader(fd);
    const root = [...reader.elements({ root: reader.meta.root, sequence: 0n })].find((e) => e.key.toString() === name);
    if (!root) return [];
    return [...reader.elements(bucketValue(Buffer.from(root.value)))].map((r) => [
      r.key.toString('hex'),
      r.value.toString('hex'),
    ]);
  } finally {
    closeSync(fd);
  }
}

describe('direct replay (rows written into the db file) against the gRPC oracle', () => {
  let cluster: TestCluster;
  let client: Etcd3;
  let dir: string;
  let store: LocalStore;
  let chain: ChainStore;

  beforeAll(async () => {
    cluster = await startCluster();
    client = cluster.client();
    dir = await mkdtemp(join(tmpdir(), 'direct-replay-'));
    store = new LocalStore(join(dir, 'store'));
    chain = await buildChainStore(client, cluster.endpoints, store, { tempDir: dir, keys: 900 });
  });

  afterAll(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  async function replayWith(
    name: string,
    makeEngine: (workDir: string) => ReplayEngine,
    toRevision?: number,
    inPlace?: boolean,
    options: { prepare?: boolean; earlyBase?: (real: EarlyBase) => EarlyBase } = {},
  ) {
    const workDir = join(dir, name);
    // From the older full, so that the replay crosses every delta.
    const fromOldest = planChains(await listSnapshots(store), { revision: toRevision }).at(-1)!;
    expect(fromOldest.full.name).toBe(chain.fulls[0].name);
    const engine = makeEngine(workDir);
    const source = storeSource(store, { chain: fromOldest, workDir, maxFetchers: 2 });
    const told = options.earlyBase;
    if (told) {
      const real = source.earlyBase!;
      source.earlyBase = async (signal) => told(await real(signal));
    }
    return replayChain({ source, chain: fromOldest, toRevision, workDir, engine, inPlace, prepare: options.prepare });
  }

  it('writes rows byte-identical to those etcd writes, and etcd serves the source keyspace from them', async () => {
    const binaries = await findEtcdBinaries();
    const direct = await replayWith('direct', () => new DirectReplayEngine({ leaseTtl: 3600 }));
    const grpc = await replayWith('grpc', (workDir) => new GrpcReplayEngine({ binaries, workDir, leaseTtl: 3600 }));
    expect(direct.revision).toBe(chain.lastRevision);
    expect(grpc.revision).toBe(chain.lastRevision);
    // HashKV covers exactly the key bucket's rows, so equal rows mean equal hashes; leases must match too.
    expect(bucketRows(direct.snapshotFile!, 'key')).toEqual(bucketRows(grpc.snapshotFile!, 'key'));
    expect(bucketRows(direct.snapshotFile!, 'lease')).toEqual(bucketRows(grpc.snapshotFile!, 'lease'));

    const inspection = await inspectSnapshotFile({
      binaries,
      file: direct.snapshotFile!,
      workDir: join(dir, 'direct'),
      atRevision: direct.baseRevision,
      fingerprint: true,
    });
    expect(inspection.fingerprint).toEqual(await keyspaceFingerprint(client, chain.lastRevision));
    expect(inspection.keys).toBe(inspection.keysAt! + direct.created - direct.deleted);
  });

  it('stops exactly at a target revision', async () => {
    const binaries = await findEtcdBinaries();
    const target = chain.deltas[1].startRevision + 3;
    const direct = await replayWith('direct-mid', () => new DirectReplayEngine(), target);
    expect(direct.revision).toBe(target);
    const inspection = await inspectSnapshotFile({
      binaries,
      file: direct.snapshotFile!,
      workDir: join(dir, 'direct-mid'),
      fingerprint: true,
    });
    expect(inspection.fingerprint).toEqual(await keyspaceFingerprint(client, target));
  });

  it("lays the member data dir out around the replayed db as etcd's tool lays it out from the replayed snapshot", async () => {
    const binaries = await findEtcdBinaries();
    const member = {
      name: 'm1',
      initialCluster: 'm1=http://127.0.0.1:2380',
      initialClusterToken: 'direct-replay',
      initialAdvertisePeerUrls: 'http://127.0.0.1:2380',
    };
    const viaSnapshot = await replayWith('via-snapshot', () => new DirectReplayEngine({ leaseTtl: 3600 }));
    const byTool = join(dir, 'laid-out-by-tool');
    await runSnapshotRestore(binaries, viaSnapshot.snapshotFile!, byTool, member);
    const inPlace = await replayWith('in-place', () => new DirectReplayEngine({ leaseTtl: 3600 }), undefined, true);
    expect(inPlace.snapshotFile).toBeUndefined();
    expect(inPlace.revision).toBe(chain.lastRevision);
    const around = join(dir, 'laid-out-around');
    await layOutMemberDataDir(binaries, inPlace.dbFile!, around, member);

    // Every bucket — the replayed key and lease rows, and what etcd's tool wrote (3.4: the consistent index;
    // 3.5: the new members too, and the term) — and the WAL and raft snapshot are the tool's, byte for byte.
    const db = (dataDir: string) => join(dataDir, 'member', 'snap', 'db');
    expect(bucketRows(db(around), 'meta')).not.toEqual(bucketRows(viaSnapshot.snapshotFile!, 'meta'));
    expect(bucketNames(db(around))).toEqual(bucketNames(db(byTool)));
    for (const bucket of bucketNames(db(byTool))) {
      expect(bucketRows(db(around), bucket), bucket).toEqual(bucketRows(db(byTool), bucket));
    }
    for (const sub of ['wal', 'snap']) {
      const names = await readdir(join(byTool, 'member', sub));
      expect(await readdir(join(around, 'member', sub))).toEqual(names);
      for (const name of names.filter((n) => n !== 'db')) {
        const [a, b] = await Promise.all([around, byTool].map((d) => readFile(join(d, 'member', sub, name))));
        expect(a.equals(b), name).toBe(true);
      }
    }

    const inspection = await inspectDataDir({
      binaries,
      dataDir: around,
      workDir: join(dir, 'in-place'),
      fingerprint: true,
    });
    expect(inspection.fingerprint).toEqual(await keyspaceFingerprint(client, chain.lastRevision));
  });

  it('writes the same rows when it takes the deltas before the full snapshot is in as after, and refuses a base other than it assumed', async () => {
    const early: EarlyBase[] = [];
    const prepared = await replayWith('prepared', () => new DirectReplayEngine({ leaseTtl: 3600 }), undefined, false, {
      earlyBase: (real) => {
        early.push(real);
        return real;
      },
    });
    const after = await replayWith('after', () => new DirectReplayEngine({ leaseTtl: 3600 }), undefined, false, {
      prepare: false,
    });
    // ours records the db's size: the rows went past it while the full snapshot came in
    expect(early).toEqual([expect.objectContaining({ recorded: true, revision: chain.fulls[0].revision })]);
    expect(prepared.revision).toBe(chain.lastRevision);
    for (const bucket of ['key', 'lease', 'meta']) {
      expect(bucketRows(prepared.snapshotFile!, bucket), bucket).toEqual(bucketRows(after.snapshotFile!, bucket));
    }
    expect(prepared).toMatchObject({ ...after, snapshotFile: prepared.snapshotFile });

    // A db larger than its recorded size says (as a 16 KiB-page db would be): the rows were written where the base
    // goes, and the replay says so rather than splice them in.
    await expect(
      replayWith('assumed-small', () => new DirectReplayEngine({ leaseTtl: 3600 }), undefined, false, {
        earlyBase: (real) => ({ ...real, dbSize: 4 * 4096 }),
      }),
    ).rejects.toThrow(BaseNotAsPreparedError);
  });
});
