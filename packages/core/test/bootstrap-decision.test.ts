import type { EtcdMember } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';
import { type BootstrapFacts, type ClusterState, decideBootstrap } from '../src/bootstrap/index.js';
import type { DataDirReport } from '../src/validation/verdict.js';

const missing = {
  verdict: 'restore-needed',
  exitCode: 3,
  reason: 'the data dir is missing',
  mode: 'full',
  dataDir: '/d',
  findings: [],
} as unknown as DataDirReport;
const damaged = { ...missing, reason: 'the db is damaged' } as DataDirReport;

function member(name: string, extra: Partial<EtcdMember> = {}): EtcdMember {
  return {
    id: name,
    name,
    peerUrls: [`http://${name}:2380`],
    clientUrls: [`http://${name}:2379`],
    isLearner: false,
    ...extra,
  };
}

const decide = (facts: Partial<BootstrapFacts> & { check: DataDirReport }) =>
  decideBootstrap({ empty: false, store: async () => ({ state: 'empty' }), ...facts });

/** The rows etcd-wrapper's multi-member starts need (docs/validate.md, The decision table). */
describe('bootstrap decisions for members that etcd-wrapper starts one by one', () => {
  it('first-start: no data, a quorum that lists this member but never saw it start', async () => {
    const cluster: ClusterState = { state: 'quorum', endpoint: 'x', members: [member('a'), member('b')] };
    const decision = await decide({ check: missing, empty: true, cluster, listed: true, unstarted: true });
    expect(decision).toMatchObject({ case: 'first-start', action: 'start', exitCode: 0 });
    // a member that ran before rejoins instead
    expect((await decide({ check: missing, empty: true, cluster, listed: true, unstarted: false })).case).toBe(
      'rejoin',
    );
    // after a restore the others hold data outside their log, which it would never be sent: it rejoins
    const backup = async () => ({ state: 'backup' as const, newestRevision: 9 });
    const restored = await decide({
      check: missing,
      empty: true,
      cluster,
      listed: true,
      unstarted: true,
      store: backup,
    });
    expect(restored.case).toBe('rejoin');
  });

  it('no leader in a cluster that never had one: an empty member goes on as if none answered', async () => {
    const starting: ClusterState = {
      state: 'no-quorum',
      answered: ['http://a:2379'],
      members: [member('a', { clientUrls: [] }), member('b', { clientUrls: [] })],
    };
    expect((await decide({ check: missing, empty: true, cluster: starting })).case).toBe('fresh');
    const backup = async () => ({ state: 'backup' as const, newestRevision: 9 });
    expect((await decide({ check: missing, empty: true, cluster: starting, store: backup })).case).toBe(
      'restore-new-cluster',
    );
    // a cluster that had a leader and lost it, or a member with data: refused
    const lost: ClusterState = { state: 'no-quorum', answered: ['http://a:2379'], members: [member('a')] };
    expect((await decide({ check: missing, empty: true, cluster: lost })).case).toBe('no-quorum');
    expect((await decide({ check: damaged, empty: false, cluster: starting })).case).toBe('no-quorum');
  });

  it("start-empty: bad data and an empty store refuse, unless ebr's behaviour is asked for", async () => {
    expect((await decide({ check: damaged })).case).toBe('no-backup');
    expect(await decide({ check: damaged, startEmptyWithoutBackup: true })).toMatchObject({
      case: 'start-empty',
      exitCode: 0,
    });
  });
});
