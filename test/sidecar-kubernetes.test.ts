import { execFile } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { promisify } from 'node:util';
import { LocalStore, listSnapshots, memberList, memberStatus } from '@etcd-steward/core';
import { makeTestCertificates, startCluster, writeWorkload } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { runProgram } from './run-program.js';
import { type KubeApiTestServer, type KubeObject, startKubeApiServer } from './servers/kube-apiserver.js';
import { etcdRevision, metric, type SidecarProcess, startSidecar, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const run = promisify(execFile);
const at = tempDir('sidecar-kubernetes-');
const NAMESPACE = 'shoot--dev';
const KUBE_FLAGS = [
  '--enable-member-lease-renewal',
  '--enable-snapshot-lease-renewal',
  '--etcd-member-resource',
  '--k8s-heartbeat-duration',
  '1s',
];

async function kubeApi(): Promise<{ server: KubeApiTestServer; kubeconfig: string }> {
  const certificates = at('certificates');
  await mkdir(certificates, { recursive: true });
  const server = await startKubeApiServer(await makeTestCertificates(certificates));
  onTestFinished(() => server.stop());
  const kubeconfig = at('kubeconfig');
  await server.writeKubeconfig(kubeconfig);
  return { server, kubeconfig };
}

const holder = (lease: KubeObject | undefined) =>
  (lease?.spec as { holderIdentity?: string } | undefined)?.holderIdentity;
const renewTime = (lease: KubeObject | undefined) => (lease?.spec as { renewTime?: string } | undefined)?.renewTime;
const memberStatusOf = (object: KubeObject | undefined) =>
  object?.status as
    | {
        id: string;
        clusterID: string;
        role: string;
        lastRevision: number;
        conditions: { type: string; status: string }[];
      }
    | undefined;

it('3 members: member leases, snapshot leases and EtcdMember status follow the snapshots and a leader change', async () => {
  const cluster = await startCluster({ members: 3 });
  onTestFinished(() => cluster.stop());
  const { server, kubeconfig } = await kubeApi();
  // druid creates the snapshot leases with no holder; the member leases and EtcdMembers the sidecars create here.
  for (const name of ['full-snapshot-revisions', 'delta-snapshot-revisions']) {
    server.put('leases', NAMESPACE, name, (lease) => {
      lease.spec = { leaseDurationSeconds: 3600 };
    });
  }
  const storeDir = at('store-3');
  const sidecars: SidecarProcess[] = [];
  onTestFinished(() => Promise.all(sidecars.map((s) => s.kill())).then(() => undefined));
  for (const [i, endpoint] of cluster.endpoints.entries()) {
    sidecars.push(
      await startSidecar({
        endpoint,
        store: `file://${storeDir}`,
        dir: at(`sidecar-3-${i}`),
        args: [...KUBE_FLAGS, '--kubeconfig', kubeconfig],
        env: { ...process.env, POD_NAME: `etcd-main-${i}`, POD_NAMESPACE: NAMESPACE },
      }),
    );
  }
  const clusterId = BigInt((await memberStatus({ endpoints: [cluster.endpoints[0]] })).clusterId).toString(16);
  const members = await memberList({ endpoints: cluster.endpoints });
  const idOf = (i: number) => BigInt(members.find((m) => m.clientUrls[0] === cluster.endpoints[i])!.id).toString(16);
  const leaderId = async () => BigInt((await memberStatus({ endpoints: [cluster.endpoints[0]] })).leader).toString(16);

  /** The lease and EtcdMember of every pod say who leads now, as etcd does. */
  const showLeader = async (leader: string) => {
    for (let i = 0; i < 3; i++) {
      const role = idOf(i) === leader ? 'Leader' : 'Member';
      if (holder(server.get('leases', NAMESPACE, `etcd-main-${i}`)) !== `${idOf(i)}:${clusterId}:${role}`) return false;
      const status = memberStatusOf(server.get('etcdmembers', NAMESPACE, `etcd-main-${i}`));
      if (status?.role !== role || status.id !== idOf(i) || status.clusterID !== clusterId) return false;
    }
    return true;
  };
  const first = await leaderId();
  await waitFor('leases and EtcdMembers showing the first leader', () => showLeader(first));
  const status = memberStatusOf(server.get('etcdmembers', NAMESPACE, 'etcd-main-0'))!;
  expect(status.conditions).toEqual([expect.objectContaining({ type: 'Ready', status: 'True' })]);
  expect(status.lastRevision).toBeGreaterThan(0);

  // The snapshot leases hold the revisions of the snapshots in the store, the full one its time of taking.
  const client = cluster.client();
  const store = new LocalStore(storeDir);
  /** The newest full and delta in the store beside what the snapshot leases hold. */
  const leasesAndStore = async () => {
    const entries = await listSnapshots(store);
    const full = entries.filter((e) => e.kind === 'Full').at(-1);
    const delta = entries.filter((e) => e.kind === 'Incr').at(-1);
    const fullLease = server.get('leases', NAMESPACE, 'full-snapshot-revisions');
    const deltaLease = server.get('leases', NAMESPACE, 'delta-snapshot-revisions');
    return {
      full: full && { lastRevision: full.lastRevision, takenAt: full.createdAt * 1000 },
      fullLease: { holder: holder(fullLease), renewTime: Date.parse(renewTime(fullLease) ?? '') },
      delta: delta?.lastRevision,
      deltaLease: holder(deltaLease),
      etcd: await etcdRevision(client),
    };
  };
  let seen: unknown;
  const leasesMatchStore = async () => {
    const now = await leasesAndStore();
    seen = now;
    return (
      now.full !== undefined &&
      now.fullLease.holder === String(now.full.lastRevision) &&
      now.fullLease.renewTime === now.full.takenAt &&
      now.deltaLease === String(now.delta) &&
      (now.delta ?? 0) >= now.etcd
    );
  };
  const leasesReachStore = (what: string) =>
    waitFor(what, leasesMatchStore, 45_000).catch((err: Error) => {
      throw new Error(`${err.message}; last seen: ${JSON.stringify(seen)}`);
    });
  // The leader's first full snapshot (after the hand-over delay) and its lease; the writes then go into deltas.
  await waitFor('the first full snapshot and its lease', async () => {
    const now = await leasesAndStore();
    return now.full !== undefined && now.fullLease.holder === String(now.full.lastRevision);
  });
  await writeWorkload(client, { keys: 200, valueSize: 100 });
  await leasesReachStore('the snapshot leases to hold the stored revisions');

  // Hand the lead to another member: the leases and EtcdMembers follow, the new leader's deltas move the lease on.
  const target = idOf(cluster.endpoints.findIndex((_, i) => idOf(i) !== first));
  await run('etcdctl', ['--endpoints', cluster.endpoints.join(','), 'move-leader', target], {
    env: { ...process.env, ETCDCTL_API: '3' },
  });
  await waitFor('etcd to name the new leader', async () => (await leaderId()) === target);
  await waitFor('leases and EtcdMembers showing the new leader', () => showLeader(target));
  const before = Number(holder(server.get('leases', NAMESPACE, 'delta-snapshot-revisions')));
  await writeWorkload(client, { keys: 100, valueSize: 100 });
  await leasesReachStore('the new leader to store deltas and renew the delta lease');
  expect(Number(holder(server.get('leases', NAMESPACE, 'delta-snapshot-revisions')))).toBeGreaterThan(before);
  // The snapshot leases only ever moved forward.
  const revisions = server
    .writes()
    .filter((w) => w.object?.metadata.name === 'delta-snapshot-revisions' && holder(w.object))
    .map((w) => Number(holder(w.object)));
  expect(revisions).toEqual([...revisions].sort((a, b) => a - b));
  for (const s of sidecars.splice(0)) expect(await s.stop()).toBe(0);
}, 120_000);

it('1 member: a conflicting update is re-read and retried; the API server down does not stop snapshots', async () => {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const { server, kubeconfig } = await kubeApi();
  server.put('leases', NAMESPACE, 'delta-snapshot-revisions', (lease) => {
    lease.spec = {};
  });
  // Another writer changes the lease just before the sidecar's first update of it: that update meets a 409.
  server.changeBeforeNextWrite('leases', NAMESPACE, 'delta-snapshot-revisions', (lease) => {
    lease.metadata.annotations = { 'changed-by': 'another writer' };
  });
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: `file://${at('store-1')}`,
    dir: at('sidecar-1'),
    args: [...KUBE_FLAGS, '--kubeconfig', kubeconfig, '--final-snapshot'],
    env: { ...process.env, POD_NAME: 'etcd-main-0', POD_NAMESPACE: NAMESPACE },
  });
  onTestFinished(() => sidecar.kill());
  const client = cluster.client();
  // After the start-up full snapshot, so that the workload goes into deltas (a slow start's full covers it all).
  await waitFor(
    'the start-up full snapshot',
    async () => ((await metric(sidecar.url, 'etcdbr_snapshot_latest_revision', 'kind="Full"')) ?? 0) > 0,
  );
  await writeWorkload(client, { keys: 100, valueSize: 100 });
  const revision = await etcdRevision(client);
  const deltaLease = () => server.get('leases', NAMESPACE, 'delta-snapshot-revisions');
  await waitFor('the delta lease to reach the revision', async () => Number(holder(deltaLease())) >= revision);
  expect(server.writes().some((w) => w.name === 'delta-snapshot-revisions' && w.status === 409)).toBe(true);
  // The retry started from the object as the other writer left it.
  expect(deltaLease()?.metadata.annotations).toEqual({ 'changed-by': 'another writer' });
  expect(await metric(sidecar.url, 'etcd_snapshot_k8s_conflicts_total', 'object="delta-snapshot-lease"')).toBe(1);

  // The API server goes away: snapshots go on, the outage is logged once, the leases catch up when it is back.
  await server.pause();
  const taken = await fetch(`${sidecar.url}/snapshot/full`, { method: 'POST' });
  expect(taken.status).toBe(200);
  const fullRevision = ((await taken.json()) as { lastRevision: number }).lastRevision;
  await writeWorkload(client, { keys: 100, valueSize: 100, prefix: '/down/' });
  const downRevision = await etcdRevision(client);
  await waitFor(
    'a delta while the API server is down',
    async () => ((await metric(sidecar.url, 'etcdbr_snapshot_latest_revision', 'kind="Incr"')) ?? 0) >= downRevision,
  );
  await waitFor(
    'the sidecar to notice the API server is down',
    async () => (await metric(sidecar.url, 'etcd_snapshot_k8s_reachable')) === 0,
  );
  expect((await fetch(`${sidecar.url}/healthz`)).status).toBe(200);
  await server.resume();
  await waitFor('the leases to catch up', async () => {
    const full = server.get('leases', NAMESPACE, 'full-snapshot-revisions');
    return Number(holder(deltaLease())) >= downRevision && Number(holder(full)) === fullRevision;
  });
  expect(await metric(sidecar.url, 'etcd_snapshot_k8s_reachable')).toBe(1);
  await writeWorkload(client, { keys: 10, prefix: '/last/' });
  expect(await sidecar.stop()).toBe(0);
  // The final snapshot, taken on SIGTERM, still renews the full-snapshot lease.
  const final = (await listSnapshots(new LocalStore(at('store-1')))).filter((e) => e.kind === 'Full').at(-1)!;
  expect(final.final).toBe(true);
  expect(holder(server.get('leases', NAMESPACE, 'full-snapshot-revisions'))).toBe(String(final.lastRevision));
  const log = await sidecar.log();
  expect(log.match(/cannot update Kubernetes objects/g)).toHaveLength(1);
  expect(log).toMatch(/the Kubernetes API server accepts updates again/);
  expect(log).not.toContain(server.token);
}, 90_000);

it('the Kubernetes flags without the pod identity, a kubeconfig or snapshots to follow stop with exit 2', async () => {
  const common = ['run', '--endpoints', 'http://127.0.0.1:1', '--store', `file://${at('store-u')}`];
  const spool = ['--spool-dir', at('spool-u')];
  const noPod = await runProgram('etcd-snapshot', [...common, ...spool, '--enable-member-lease-renewal'], {
    POD_NAME: '',
    POD_NAMESPACE: '',
  });
  expect(noPod.code).toBe(2);
  expect(noPod.stderr).toMatch(
    /--enable-member-lease-renewal needs the environment variables POD_NAME and POD_NAMESPACE/,
  );
  const noNamespace = await runProgram('etcd-snapshot', [...common, ...spool, '--enable-snapshot-lease-renewal'], {
    POD_NAME: '',
    POD_NAMESPACE: '',
  });
  expect(noNamespace.code).toBe(2);
  // The snapshot leases are the namespace's, not the pod's: only POD_NAMESPACE is asked for.
  expect(noNamespace.stderr).toMatch(/--enable-snapshot-lease-renewal needs the environment variable POD_NAMESPACE:/);
  const noSnapshots = await runProgram(
    'etcd-snapshot',
    [...common, ...spool, '--no-snapshotter', '--enable-snapshot-lease-renewal'],
    { POD_NAMESPACE: 'n' },
  );
  expect(noSnapshots.code).toBe(2);
  expect(noSnapshots.stderr).toMatch(/--enable-snapshot-lease-renewal follows the snapshots this sidecar takes/);
  const badConfig = await runProgram(
    'etcd-snapshot',
    [...common, ...spool, '--etcd-member-resource', '--kubeconfig', at('missing-kubeconfig')],
    { POD_NAME: 'p', POD_NAMESPACE: 'n' },
  );
  expect(badConfig.code).toBe(2);
  const none = await runProgram('etcd-snapshot', [...common, ...spool, '--etcd-member-resource'], {
    POD_NAME: 'p',
    POD_NAMESPACE: 'n',
    KUBECONFIG: '',
    HOME: at('empty-home'),
  });
  expect(none.code).toBe(2);
  expect(none.stderr).toMatch(
    /no Kubernetes API server is configured: run in a pod with a service account, or give --kubeconfig/,
  );
  expect(badConfig.stderr).toMatch(/--kubeconfig .*missing-kubeconfig: cannot load it/);
});
