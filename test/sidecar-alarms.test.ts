import { freePort, keyspaceFingerprint, LocalStore, listAlarms, memberStatus, setAlarm } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { expectRestored, keyspaceOnceStored, metric, startSidecar, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-alarms-');
const QUOTA = 16 * 2 ** 20;

it('a NOSPACE alarm from a full etcd is cleared by the sidecar (compact, defragment, disarm) with no data lost, and writes succeed again', async () => {
  const cluster = await startCluster({ etcdArgs: [`--quota-backend-bytes=${QUOTA}`] });
  onTestFinished(() => cluster.stop());
  const client = cluster.client();
  const conn = { endpoints: cluster.endpoints };
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: `file://${at('store')}`,
    dir: at('sidecar'),
    args: ['--alarm-check-period', '1s', '--alarm-quota-bytes', '16Mi', '--no-defragmentation'],
  });
  onTestFinished(() => sidecar.kill());

  // 50 keys of 64 KiB overwritten until etcd refuses: the history fills the quota, the live data is 3.2 MiB
  // its own client: etcd3 pauses a client that was refused several times in a row
  const filler = cluster.client();
  const value = Buffer.alloc(64 * 1024, 'v');
  let refused: unknown;
  for (let round = 0; !refused && round < 100; round++) {
    for (let k = 0; k < 50 && !refused; k++) {
      await filler
        .put(`/fill/${k}`)
        .value(Buffer.concat([Buffer.from(`${round}:`), value]))
        .catch((err) => {
          refused = err;
        });
    }
  }
  expect(String(refused)).toMatch(/database space exceeded/);
  // what etcd holds when it refused; the sidecar may be clearing the alarm already
  const held = await keyspaceFingerprint(client);
  expect(held.keys).toBe(50);

  await waitFor('the sidecar to clear the NOSPACE alarm', async () => (await listAlarms(conn)).length === 0, 60_000);
  expect(await keyspaceFingerprint(client, held.revision)).toEqual(held);
  expect((await keyspaceFingerprint(client)).sha256).toBe(held.sha256);
  await client.put('/after-recovery').value('written');
  expect(await client.get('/after-recovery').string()).toBe('written');
  expect((await memberStatus(conn)).dbSize).toBeLessThan(QUOTA * 0.8);

  expect(await metric(sidecar.url, 'etcd_snapshot_nospace_recoveries_total', 'succeeded="true"')).toBeGreaterThan(0);
  const source = await keyspaceOnceStored(client, sidecar.url);
  const code = await sidecar.stop();
  const log = await sidecar.log();
  expect(code, log).toBe(0);
  const steps = [
    'NOSPACE alarm: etcd refuses writes; recovering',
    'NOSPACE: compacting the history',
    'NOSPACE: defragmenting every member',
    'member defragmented',
    'NOSPACE: alarm disarmed',
  ].map((msg) => log.indexOf(`"msg":"${msg}"`));
  expect(steps.every((at) => at >= 0)).toBe(true);
  expect([...steps].sort((a, b) => a - b)).toEqual(steps);
  // the compaction kept what the deltas still needed: the chain goes on, and restores to what etcd holds
  expect(log).not.toMatch(/compacted its history past/);
  await expectRestored(new LocalStore(at('store')), at('restore'), source);
});

it('a CORRUPT alarm on its member fails /healthz and stops snapshots from it until it is disarmed', async () => {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const conn = { endpoints: cluster.endpoints };
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: `file://${at('corrupt-store')}`,
    dir: at('corrupt-sidecar'),
    args: ['--alarm-check-period', '1s'],
  });
  onTestFinished(() => sidecar.kill());
  const { url } = sidecar;
  await waitFor('leadership', async () => (await metric(url, 'etcd_snapshot_leader')) === 1);
  const { memberId } = await memberStatus(conn);

  await setAlarm(conn, { memberId, alarm: 'CORRUPT' }, true);
  await waitFor('/healthz to fail', async () => (await fetch(`${url}/healthz`)).status === 503);
  expect(await metric(url, 'etcd_snapshot_alarms', 'alarm="CORRUPT"')).toBe(1);
  await waitFor('snapshots to stop', async () => (await metric(url, 'etcd_snapshot_leader')) === 0);
  const refused = await fetch(`${url}/snapshot/full`, { method: 'POST' });
  expect(refused.status).toBe(503);
  expect(refused.headers.get('retry-after')).toBe('5');
  expect(await refused.json()).toEqual({
    error:
      'this sidecar does not take snapshots: its etcd member leads the cluster, but snapshots from it are stopped: its etcd member has a CORRUPT alarm',
    leader: url,
  });

  await setAlarm(conn, { memberId, alarm: 'CORRUPT' }, false);
  await waitFor('/healthz to pass', async () => (await fetch(`${url}/healthz`)).status === 200);
  await waitFor('snapshots to go on', async () => (await metric(url, 'etcd_snapshot_leader')) === 1);
  expect(await sidecar.stop()).toBe(0);
  expect(await sidecar.log()).toMatch(/"level":"error","msg":"CORRUPT alarm on this member/);
});

it('an alarm read that fails is logged once, not once by each component that reads the alarms', async () => {
  // NOSPACE recovery and the CORRUPT fence both read etcd's alarms; with etcd down both reads fail
  const sidecar = await startSidecar({
    endpoint: `http://127.0.0.1:${await freePort()}`,
    store: `file://${at('store-down')}`,
    dir: at('sidecar-down'),
    args: ['--alarm-check-period', '1s', '--no-snapshotter'],
  });
  onTestFinished(() => sidecar.kill());
  const said = async () => ((await sidecar.log()).match(/cannot read etcd alarms/g) ?? []).length;
  await waitFor('the first failed read', async () => (await said()) > 0);
  await new Promise((resolve) => setTimeout(resolve, 4_000)); // several periods of both
  expect(await said()).toBe(1);
});
