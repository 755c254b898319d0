import { rm } from 'node:fs/promises';
import { type BootstrapResult, memberList, memberStatus } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { runProgram } from './run-program.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('validate-bootstrap-leader-lost-');

it('a member whose data was lost while it led rejoins at once: it waits for a new leader before asking to be removed', async () => {
  const cluster = await startCluster({ members: 3 });
  onTestFinished(() => cluster.stop());
  const status = await memberStatus({ endpoints: [cluster.endpoints[0]] });
  const leaderName = (await memberList({ endpoints: [cluster.endpoints[0]] })).find(
    (m) => m.id === status.leader,
  )?.name;
  const leader = cluster.members.find((m) => m.name === leaderName)!;
  const others = cluster.members.filter((m) => m !== leader).map((m) => m.clientUrl);

  // its volume lost with it; etcd-wrapper asks for the initialization within a fraction of a second, while the
  // others still name it their leader (etcd's election timeout is a second)
  await leader.kill();
  await rm(leader.dataDir, { recursive: true, force: true });
  const started = Date.now();
  const res = await runProgram(
    'etcd-validate',
    [
      ...['bootstrap', '--data-dir', leader.dataDir, '--store', `file://${at('empty-store')}`],
      ...['--name', leader.name, '--initial-advertise-peer-urls', leader.peerUrl],
      ...['--initial-cluster', cluster.members.map((m) => `${m.name}=${m.peerUrl}`).join(',')],
      ...['--endpoints', others.join(','), '--output', 'json'],
    ],
    { POD_NAMESPACE: '' },
  );
  const seconds = (Date.now() - started) / 1000;
  expect(res.code, res.stderr).toBe(0);
  const result = JSON.parse(res.stdout) as BootstrapResult;
  expect(result.case).toBe('rejoin');
  expect(res.stderr).toMatch(/this member led the cluster: waiting for the others to elect another leader first/);
  // the removal went to the new leader: no MemberRemove waiting 10 s on the dead one
  expect(seconds).toBeLessThan(8);
  const members = await memberList({ endpoints: [others[0]] });
  expect(members.filter((m) => m.isLearner).map((m) => m.peerUrls)).toEqual([[leader.peerUrl]]);
});
