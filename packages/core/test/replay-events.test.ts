import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCluster, storeDeltas, type TestCluster, watchEvents, writeWorkload } from '@etcd-steward/testing';
import type { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listSnapshots } from '../src/backup/snapshot-catalog.js';
import { planChains } from '../src/backup/snapshot-chain.js';
import { takeFullSnapshot } from '../src/backup/take-full-snapshot.js';
import { findEtcdBinaries } from '../src/etcd/etcd-binaries.js';
import { type KeyspaceFingerprint, keyspaceFingerprint } from '../src/etcd/keyspace-fingerprint.js';
import { inspectSnapshotFile } from '../src/etcd/snapshot-inspection.js';
import type { Revision } from '../src/format/delta-revisions.js';
import { storeSource } from '../src/replay/chain-source.js';
import { replayChain } from '../src/replay/replay-chain.js';
import type { ReplayEngine } from '../src/replay/replay-engine.js';
import { GrpcReplayEngine } from '../src/replay/replay-events.js';
import { LocalStore } from '../src/store/local.js';

/** Delays the first revision, so that a replay outlasts the short lease in the full snapshot. */
class SlowStart implements ReplayEngine {
  readonly name = 'slow-start';
  private first = true;
  constructor(
    private readonly inner: ReplayEngine,
    private readonly delayMs: number,
  ) {}
  open(base: { file: string; revision: number }) {
    return this.inner.open(base);
  }
  async apply(rev: Revision) {
    if (this.first) await sleep(this.delayMs);
    this.first = false;
    return this.inner.apply(rev);
  }
  checkpoint(expected: number) {
    return this.inner.checkpoint(expected);
  }
  finish(file: string) {
    return this.inner.finish(file);
  }
  close() {
    return this.inner.close();
  }
}

describe('gRPC replay into a private etcd (real etcd)', () => {
  let cluster: TestCluster;
  let client: Etcd3;
  let dir: string;
  let store: LocalStore;
  let baseRevision: number;
  let lastRevision: number;
  let midRevision: number;
  let atMid: KeyspaceFingerprint;
  let atLast: KeyspaceFingerprint;

  beforeAll(async () => {
    cluster = await startCluster();
    client = cluster.client();
    dir = await mkdtemp(join(tmpdir(), 'replay-events-'));
    store = new LocalStore(join(dir, 'store'));
    await writeWorkload(client, { keys: 400, seed: 1 });
    // A short lease that the source keeps alive: in the private etcd only the replay can keep it.
    const short = client.lease(2);
    await short.put('/short/a').value('kept');
    const full = await takeFullSnapshot({
      connection: { endpoints: cluster.endpoints },
      store,
      compression: 'gzip',
      tempDir: dir,
    });
    baseRevision = full.revision;
    await writeWorkload(client, { keys: 300, seed: 2, prefix: '/more/' });
    await client
      .put('/short/b')
      .value('x')
      .lease(await short.grant())
      .exec();
    lastRevision = Number((await client.kv.range({ key: Buffer.from('/') })).header.revision);
    midRevision = Math.floor((baseRevision + lastRevision) / 2);
    atMid = await keyspaceFingerprint(client, midRevision);
    atLast = await keyspaceFingerprint(client, lastRevision);
    const events = await watchEvents(client, baseRevision + 1, lastRevision);
    await storeDeltas(store, events, { startRevision: baseRevision + 1, cuts: [baseRevision + 50, midRevision + 3] });
    short.release();
  });

  afterAll(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  async function replay(workDir: string, options: { toRevision?: number; slow?: boolean; maxTxnOps?: number } = {}) {
    const binaries = await findEtcdBinaries();
    const [chain] = planChains(await listSnapshots(store), { revision: options.toRevision });
    const grpc = new GrpcReplayEngine({
      binaries,
      workDir: join(workDir, 'engine'),
      limits: { maxTxnOps: options.maxTxnOps ?? 10240, maxRequestBytes: 10 << 20 },
    });
    const engine = options.slow ? new SlowStart(grpc, 4000) : grpc;
    const source = storeSource(store, { chain, workDir, maxFetchers: 2 });
    const result = await replayChain({ source, chain, toRevision: options.toRevision, workDir, engine });
    const inspection = await inspectSnapshotFile({
      binaries,
      file: result.snapshotFile!,
      workDir,
      atRevision: result.baseRevision,
      fingerprint: true,
    });
    return { result, inspection };
  }

  it('rebuilds the exact keyspace, keeping every lease of the full snapshot alive through a slow replay', async () => {
    const { result, inspection } = await replay(join(dir, 'all'), { slow: true });
    expect(result.revision).toBe(lastRevision);
    expect(result.deltas).toBe(3);
    expect(inspection.fingerprint).toEqual(atLast);
    expect(inspection.keys).toBe(inspection.keysAt! + result.created - result.deleted);
  });

  it('stops exactly at a target revision', async () => {
    const { result, inspection } = await replay(join(dir, 'mid'), { toRevision: midRevision });
    expect(result.revision).toBe(midRevision);
    expect(inspection.fingerprint).toEqual(atMid);
  });

  it('refuses a revision larger than one txn may be, naming the flags', async () => {
    await expect(replay(join(dir, 'limits'), { maxTxnOps: 4 })).rejects.toThrow(/--max-txn-ops=4 --max-request-bytes=/);
  });
});
