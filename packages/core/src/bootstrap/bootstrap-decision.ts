import { type DataDirReport, VERDICTS } from '../validation/verdict.js';
import { type ClusterState, neverHadQuorum } from './cluster-probe.js';

/**
 * The rows of bootstrap's decision table (docs/validate.md, Bootstrap): what it does in each case, and the
 * exit code it ends with. A refusal reuses the check's exit code of the same meaning; 0 means etcd may start.
 */
export const BOOTSTRAP_CASES = {
  /** The data dir passed the check: etcd starts on it. */
  valid: { action: 'start', exitCode: 0 },
  /** No data, and no backup to restore: a new member of a new cluster. */
  fresh: { action: 'start', exitCode: 0 },
  /** One member: the data dir moved aside, the store's newest state restored into it. */
  restore: { action: 'restore', exitCode: 0 },
  /** Several members, none reachable, a backup in the store: restored as a member of a new cluster. */
  'restore-new-cluster': { action: 'restore', exitCode: 0 },
  /** Several members, the others have quorum: removed, moved aside, added back as a learner. */
  rejoin: { action: 'rejoin', exitCode: 0 },
  /** Several members, no data: the cluster lists this member, which never started; it joins as it is. */
  'first-start': { action: 'start', exitCode: 0 },
  /** Bad data, nothing to restore it from, and ebr's behaviour asked for: moved aside, etcd starts empty. */
  'start-empty': { action: 'start', exitCode: 0 },
  /** Bad data and nothing to restore it from. */
  'no-backup': { action: 'refuse', exitCode: VERDICTS['restore-needed'].exitCode },
  'wrong-volume': { action: 'refuse', exitCode: VERDICTS['wrong-volume'].exitCode },
  /** The check could not finish, or the store could not be listed when a restore was needed. */
  'cannot-decide': { action: 'refuse', exitCode: VERDICTS['cannot-decide'].exitCode },
  /** Several members, some answer but none has a leader: neither a rejoin nor a new cluster is safe. */
  'no-quorum': { action: 'refuse', exitCode: VERDICTS['cannot-decide'].exitCode },
} as const;

export type BootstrapCase = keyof typeof BOOTSTRAP_CASES;
export type BootstrapAction = (typeof BOOTSTRAP_CASES)[BootstrapCase]['action'];

/** Whether the store can restore this member: it holds a full snapshot, holds none, or could not be listed. */
export type StoreState =
  | { state: 'backup'; newestRevision: number }
  | { state: 'empty' }
  | { state: 'unreachable'; reason: string };

export interface BootstrapFacts {
  check: DataDirReport;
  /** The data dir is missing or empty. */
  empty: boolean;
  /** For a multi-member --initial-cluster only: what the other members say. */
  cluster?: ClusterState;
  /** With a cluster that has quorum: its member list names this member. */
  listed?: boolean;
  /** With a cluster that has quorum: it lists this member as a voter that never started (no client URL). */
  unstarted?: boolean;
  /** Asked only when a restore is in question. */
  store: () => Promise<StoreState>;
  /** ebr's behaviour: bad data with no backup is moved aside and etcd starts empty, where it would refuse. */
  startEmptyWithoutBackup?: boolean;
}

export interface BootstrapDecision {
  case: BootstrapCase;
  action: BootstrapAction;
  exitCode: number;
  /** Why, in one sentence. */
  reason: string;
}

/** The decision table, in one place: the check's verdict first, then the cluster, then the store. */
export async function decideBootstrap(facts: BootstrapFacts): Promise<BootstrapDecision> {
  const { check, cluster } = facts;
  const decided = (c: BootstrapCase, reason: string): BootstrapDecision => ({
    case: c,
    action: BOOTSTRAP_CASES[c].action,
    exitCode: BOOTSTRAP_CASES[c].exitCode,
    reason,
  });
  if (check.verdict === 'wrong-volume') return decided('wrong-volume', check.reason);
  if (check.verdict === 'cannot-decide') return decided('cannot-decide', check.reason);
  if (check.verdict === 'valid') {
    if (cluster?.state === 'quorum' && !facts.listed) {
      return decided('rejoin', `${check.reason}, but the cluster no longer lists this member: it rejoins as a learner`);
    }
    return decided('valid', check.reason);
  }
  // restore needed: missing, damaged or stale
  // Only for a cluster started from nothing: one restored from a snapshot holds data outside its raft log, which
  // a member starting empty with the first members' log would never be sent (their logs match from the start).
  if (cluster?.state === 'quorum' && facts.empty && facts.unstarted && (await facts.store()).state === 'empty') {
    return decided(
      'first-start',
      `${check.reason}; the cluster lists this member, which has never started, and the store holds no backup (the cluster started from nothing): it starts empty and the leader sends it the log`,
    );
  }
  if (cluster?.state === 'quorum') {
    return decided('rejoin', `${check.reason}; the cluster has quorum: this member rejoins it as a learner`);
  }
  // A member with no data that finds no leader in a cluster that never had one: its peers are starting beside it
  // for the first time (etcd-wrapper starts each etcd after its own initialization). Refusing would deadlock
  // them, each waiting for the others: it goes on as if none answered.
  if (cluster?.state === 'no-quorum' && !(facts.empty && neverHadQuorum(cluster))) {
    return decided(
      'no-quorum',
      `${check.reason}; members answer at ${cluster.answered.join(', ')} but none has a leader: neither rejoining nor restoring a new cluster is safe. Bring the cluster's quorum back, then run bootstrap again`,
    );
  }
  const store = await facts.store();
  const whole =
    cluster?.state === 'no-quorum'
      ? `members answer at ${cluster.answered.join(', ')} in a cluster that never had a leader (starting beside this one); `
      : cluster
        ? 'no member of the cluster answers; '
        : '';
  if (store.state === 'unreachable') {
    return decided(
      'cannot-decide',
      `${check.reason}; ${whole}the store could not be listed to restore from: ${store.reason}`,
    );
  }
  if (store.state === 'empty') {
    if (facts.empty)
      return decided(
        'fresh',
        `${check.reason}, and the store holds no full snapshot: ${whole}etcd starts a new ${cluster ? 'cluster' : 'member'}`,
      );
    if (facts.startEmptyWithoutBackup) {
      return decided(
        'start-empty',
        `${check.reason}, and the store holds no full snapshot: as asked (ebr's behaviour), the data is moved aside and etcd starts empty`,
      );
    }
    return decided(
      'no-backup',
      `${check.reason}, and the store holds no full snapshot to restore it from: etcd must not start on this data. Restore it by hand, or move it away to start empty`,
    );
  }
  return cluster
    ? decided(
        'restore-new-cluster',
        `${check.reason}; ${whole}the cluster is restored as a new one from the store (revision ${store.newestRevision})`,
      )
    : decided('restore', `${check.reason}; restoring from the store (revision ${store.newestRevision})`);
}
