import { readdir, rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import {
  type BootstrapResult,
  createEtcdClient,
  EtcdProcess,
  findEtcdBinaries,
  freePort,
  keyspaceFingerprint,
  LocalStore,
  memberList,
  memberRemove,
  memberStatus,
  takeFullSnapshot,
} from '@etcd-steward/core';
import { fingerprintRestored, startCluster, type TestCluster, writeWorkload } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runProgram } from './run-program.js';
import { tempDir } from './temp-dir.js';

/** The multi-member rows of docs/validate.md, Bootstrap, on a real 3-member cluster. */
describe('etcd-validate bootstrap (the built program, a 3-member cluster)', () => {
  const path = tempDir('validate-bootstrap-cluster-');
  let cluster: TestCluster;
  let storeUrl: string;
  const started: EtcdProcess[] = [];
  const peerPort = (m: EtcdProcess) => Number(new URL(m.peerUrl).port);
  const clientPort = (m: EtcdProcess) => Number(new URL(m.clientUrl).port);
  const initialCluster = () => cluster.members.map((m) => `${m.name}=${m.peerUrl}`).join(',');

  beforeAll(async () => {
    cluster = await startCluster({ members: 3 });
    const client = cluster.client();
    await writeWorkload(client, { keys: 300, valueSize: 200 });
    await takeFullSnapshot({
      connection: { endpoints: cluster.endpoints },
      store: new LocalStore(path('store')),
      compression: 'none',
      tempDir: path(),
    });
    storeUrl = `file://${path('store')}`;
  });

  afterAll(async () => {
    await Promise.all(started.map((m) => m.stop()));
    await cluster?.stop();
  });

  async function waitUntil(what: string, done: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async function bootstrap(member: EtcdProcess, dataDir: string, endpoints: string[], args: string[] = []) {
    const res = await runProgram(
      'etcd-validate',
      [
        'bootstrap',
        '--data-dir',
        dataDir,
        '--store',
        storeUrl,
        '--name',
        member.name,
        '--initial-cluster',
        initialCluster(),
        '--initial-advertise-peer-urls',
        member.peerUrl,
        '--endpoints',
        endpoints.join(','),
        '--output',
        'json',
        ...args,
      ],
      { POD_NAMESPACE: '' },
    );
    return { ...res, result: res.stdout ? (JSON.parse(res.stdout) as BootstrapResult) : undefined };
  }

  it('row rejoin: a member whose data was wiped rejoins as a learner, is promoted, and the cluster has 3 voting members with one keyspace', async () => {
    const [m0, m1, m2] = cluster.members;
    const others = [m0.clientUrl, m1.clientUrl];
    await m2.stop();
    await rm(m2.dataDir, { recursive: true, force: true });
    const client = cluster.client();
    for (let i = 0; i < 200; i++) await client.put(`/while-down/${i}`).value('x'.repeat(100)); // for the learner to catch up on

    const { code, result, stderr } = await bootstrap(m2, m2.dataDir, others);
    expect(code, stderr).toBe(0);
    expect(result?.case).toBe('rejoin');
    expect(result?.etcd?.initialClusterState).toBe('existing');
    const listed = await memberList({ endpoints: [m0.clientUrl] });
    expect(listed.filter((m) => m.isLearner).map((m) => m.peerUrls)).toEqual([[m2.peerUrl]]);

    const binaries = await findEtcdBinaries();
    const restarted = await EtcdProcess.start({
      binaries,
      name: m2.name,
      dataDir: m2.dataDir,
      logFile: join(cluster.dir, 'm2-rejoined.log'),
      clientPort: clientPort(m2),
      peerPort: peerPort(m2),
      initialCluster: result?.etcd?.initialCluster,
      clusterState: result?.etcd?.initialClusterState,
    });
    started.push(restarted);
    await restarted.waitHealthy(60_000);

    const promote = await runProgram('etcd-validate', [
      'promote',
      '--name',
      m2.name,
      '--initial-advertise-peer-urls',
      m2.peerUrl,
      '--endpoints',
      others.join(','),
      '--timeout',
      '120',
    ]);
    expect(promote.code, promote.stderr).toBe(0);
    expect(promote.stdout).toMatch(/m2 \(id \d+\) is now a voting member/);

    const members = await memberList({ endpoints: [m0.clientUrl] });
    expect(members.map((m) => [m.name, m.isLearner]).sort()).toEqual([
      ['m0', false],
      ['m1', false],
      ['m2', false],
    ]);
    const revision = Number((await client.kv.range({ key: Buffer.from('/') })).header.revision);
    const fingerprints = [];
    for (const endpoint of [m0.clientUrl, m1.clientUrl, restarted.clientUrl]) {
      const one = createEtcdClient({ endpoints: [endpoint] });
      try {
        // linearizable reads: each member answers once it has applied the cluster's commit index
        fingerprints.push(await keyspaceFingerprint(one, revision));
      } finally {
        one.close();
      }
    }
    expect(fingerprints[0].keys).toBeGreaterThan(400);
    expect(fingerprints[1]).toEqual(fingerprints[0]);
    expect(fingerprints[2]).toEqual(fingerprints[0]);
    for (const status of await Promise.all(
      [m0, m1, restarted].map((m) => memberStatus({ endpoints: [m.clientUrl] })),
    )) {
      expect(status.leader).not.toBe('0');
    }
  });

  it('row rejoin: sound data of a member the cluster no longer lists is moved aside, and the member added back as a learner', async () => {
    const [m0, m1] = cluster.members;
    await m1.stop();
    const listed = await memberList({ endpoints: [m0.clientUrl] });
    const id = listed.find((m) => m.name === 'm1')?.id ?? '';
    await waitUntil('etcd to allow removing m1', () =>
      memberRemove({ endpoints: [m0.clientUrl] }, id).then(
        () => true,
        (err) => {
          if (!/not enough started members|unhealthy cluster/.test(String(err))) throw err;
          return false;
        },
      ),
    );
    const { code, result, stderr } = await bootstrap(m1, m1.dataDir, [m0.clientUrl, started[0].clientUrl]);
    expect(code, stderr).toBe(0);
    expect(result?.case).toBe('rejoin');
    expect(result?.reason).toMatch(/the cluster no longer lists this member/);
    expect(result?.movedAside).toMatch(/m1\.bad-/);
    expect((await readdir(cluster.dir)).filter((n) => n.startsWith('m1')).sort()).toEqual([
      basename(result?.movedAside ?? ''),
      'm1.log',
    ]);
    const after = await memberList({ endpoints: [m0.clientUrl] });
    expect(after.filter((m) => m.isLearner).map((m) => m.peerUrls)).toEqual([[m1.peerUrl]]);
  });

  it('row restore-new-cluster: no member answers and the store has data: each member restores, and they form a new cluster', async () => {
    const unreachable = [`http://127.0.0.1:${await freePort()}`];
    const peers = [];
    for (const name of ['n0', 'n1', 'n2'])
      peers.push({ name, peerPort: await freePort(), dataDir: path('new', name, 'data') });
    const newCluster = peers.map((p) => `${p.name}=http://127.0.0.1:${p.peerPort}`).join(',');
    for (const p of peers) {
      const res = await runProgram(
        'etcd-validate',
        [
          'bootstrap',
          ...['--data-dir', p.dataDir, '--store', storeUrl, '--name', p.name],
          ...['--initial-cluster', newCluster, '--initial-cluster-token', 'restored'],
          ...['--initial-advertise-peer-urls', `http://127.0.0.1:${p.peerPort}`],
          ...['--endpoints', unreachable.join(','), '--output', 'json'],
        ],
        { POD_NAMESPACE: '' },
      );
      expect(res.code, res.stderr).toBe(0);
      const result = JSON.parse(res.stdout) as BootstrapResult;
      expect(result.case).toBe('restore-new-cluster');
      expect(result.etcd).toEqual({ initialClusterState: 'new', initialCluster: newCluster });
    }
    const fingerprints = await fingerprintRestored(peers, { initialCluster: newCluster, clusterToken: 'restored' });
    expect(fingerprints[0].keys).toBeGreaterThan(200);
    expect(fingerprints[1]).toEqual(fingerprints[0]);
    expect(fingerprints[2]).toEqual(fingerprints[0]);
  });

  it('row no-quorum: a member answers but has no leader: exit 6, nothing touched', async () => {
    const [m0, m1] = cluster.members;
    await m1.stop();
    await Promise.all(started.map((m) => m.stop()));
    // m0 alone drops its leader after an election timeout
    for (let i = 0; (await memberStatus({ endpoints: [m0.clientUrl] })).leader !== '0'; i++) {
      if (i > 300) throw new Error('m0 kept a leader without quorum');
      await new Promise((r) => setTimeout(r, 100));
    }
    const m2 = cluster.members[2];
    const { code, result } = await bootstrap(m2, path('no-quorum', 'data'), [m0.clientUrl]);
    expect(code).toBe(6);
    expect(result?.case).toBe('no-quorum');
    expect(result?.reason).toMatch(/none has a leader/);
    expect(await readdir(path()).then((names) => names.filter((n) => n.startsWith('no-quorum')))).toEqual([]);
  });
});
