import { listSnapshots } from '../backup/snapshot-catalog.js';
import { errorMessage, UsageError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import type { EtcdMember } from '../etcd/etcd-members.js';
import { clusterMembers, type MemberConfig } from '../etcd/snapshot-restore-command.js';
import { type RestoreResult, restore } from '../restore/restore.js';
import { openStoreForCheck } from '../validation/store-facts.js';
import { validateDataDir } from '../validation/validate-data-dir.js';
import type { DataDirReport, ValidationMode } from '../validation/verdict.js';
import { type BootstrapDecision, decideBootstrap, type StoreState } from './bootstrap-decision.js';
import { type ClusterState, findMember, probeCluster } from './cluster-probe.js';
import { isEmptyDir, moveAside, moveBack } from './move-aside.js';
import { rejoinAsLearner } from './rejoin-as-learner.js';
import { lockDataDir } from './running-etcd.js';

export interface BootstrapOptions {
  dataDir: string;
  store: string;
  mode: ValidationMode;
  failBelowRevision?: number;
  /** POD_NAMESPACE, for the check's safe_guard. */
  namespace?: string;
  /** This member as etcd is started with it; several members in `initialCluster` make it a cluster member. */
  member: MemberConfig;
  /** The other members' client URLs (`--endpoints`): needed when `initialCluster` names several members. */
  cluster?: EtcdConnection;
  /** Decide and say what would be done; touch nothing (not even safe_guard). */
  dryRun?: boolean;
  etcdBinDir?: string;
  /** Keys that decrypt encrypted snapshots for a restore (docs/encryption.md). */
  encryptionKeyFile?: string;
  /** Bad data and an empty store: move the data aside and let etcd start empty, as ebr does, instead of refusing. */
  startEmptyWithoutBackup?: boolean;
  logger?: Logger;
  signal?: AbortSignal;
}

export interface BootstrapResult extends BootstrapDecision {
  dataDir: string;
  dryRun: boolean;
  /** What was done (or, in a dry run, would be), in order, one sentence each. */
  steps: string[];
  check: DataDirReport;
  /** Where the old data went. */
  movedAside?: string;
  restored?: Pick<RestoreResult, 'revision' | 'keys' | 'snapshot' | 'deltas'>;
  learnerId?: string;
  /**
   * How etcd must start on a data dir it will create: `existing` with the cluster as it is after a rejoin,
   * `new` for a fresh one. Absent when the data dir holds data (etcd then ignores both flags).
   */
  etcd?: { initialClusterState: 'new' | 'existing'; initialCluster: string };
}

/**
 * etcd-validate bootstrap, and the sidecar's /initialization: checks the data dir, asks the other members (with
 * several) and the store only when the decision needs them, decides by one table (bootstrap-decision.ts) and acts.
 * Old data is only ever moved aside, never deleted, and is moved back when the restore that was to replace it
 * fails; a refusal touches nothing. etcd may start when the exit code is 0.
 */
export async function bootstrap(options: BootstrapOptions): Promise<BootstrapResult> {
  const logger = options.logger ?? silentLogger;
  const { member } = options;
  const several = clusterMembers(member.initialCluster).length > 1;
  if (several && !options.cluster) {
    throw new UsageError(
      `--initial-cluster names ${clusterMembers(member.initialCluster).length} members: give the other members' client URLs with --endpoints, so that bootstrap can ask the cluster`,
    );
  }
  // Held until bootstrap is done: nothing is judged or moved while an etcd has the db open, nor one started under it.
  const lock = await lockDataDir(options.dataDir);
  try {
    // Before anything is asked: a store set up wrong is bad usage; one that is down matters only for a restore.
    const store = await openStoreForCheck(options.store);
    try {
      return await decideAndAct(options, several, store, logger);
    } finally {
      if (!('unreachable' in store)) await store.close?.();
    }
  } finally {
    await lock.release();
  }
}

async function decideAndAct(
  options: BootstrapOptions,
  several: boolean,
  store: StoreForCheck,
  logger: Logger,
): Promise<BootstrapResult> {
  const { dataDir, member } = options;
  const storeUrl = options.store;
  const cluster: ClusterState | undefined = several ? await probeCluster(options.cluster!) : undefined;
  if (cluster) logger.info('asked the cluster', { state: cluster.state });
  const empty = await isEmptyDir(dataDir);
  // With several members the cluster, not the store, is the reference: a member behind its peers catches up
  // from the leader, so the store's revision is compared for a single member only.
  const check = await validateDataDir({
    dataDir,
    mode: options.mode,
    namespace: options.namespace,
    readOnly: options.dryRun,
    store: several ? undefined : storeUrl,
    failBelowRevision: options.failBelowRevision,
    maxRevisionsAhead: Number.MAX_SAFE_INTEGER,
  });
  const decision = await decideBootstrap({
    check,
    empty,
    cluster,
    listed: cluster?.state === 'quorum' ? findMember(cluster.members, member) !== undefined : undefined,
    unstarted: cluster?.state === 'quorum' ? neverStarted(findMember(cluster.members, member)) : undefined,
    store: () => storeState(store),
    startEmptyWithoutBackup: options.startEmptyWithoutBackup,
  });
  const result: BootstrapResult = { ...decision, dataDir, dryRun: options.dryRun ?? false, steps: [], check };
  const step = (text: string) => {
    result.steps.push(text);
    if (!options.dryRun) logger.info(text);
  };
  logger.info('bootstrap decided', { case: decision.case, reason: decision.reason, dryRun: result.dryRun });

  switch (decision.case) {
    case 'valid':
      step(`start etcd on ${dataDir} as it is`);
      break;
    case 'fresh':
      step(`start etcd on the empty ${dataDir}: a new ${several ? 'cluster' : 'member'}`);
      result.etcd = { initialClusterState: 'new', initialCluster: member.initialCluster };
      break;
    case 'start-empty': {
      if (options.dryRun) step(`move ${dataDir} aside to ${dataDir}.bad-<time>`);
      else {
        result.movedAside = await moveAside(dataDir);
        step(`moved ${dataDir} aside to ${result.movedAside}`);
      }
      step(`start etcd on the empty ${dataDir}: a new ${several ? 'cluster' : 'member'}, holding no data`);
      result.etcd = { initialClusterState: 'new', initialCluster: member.initialCluster };
      break;
    }
    case 'first-start':
      // etcd's `new` start joins a cluster that lists it unstarted: the cluster's ID is derived from the same list
      step(`start etcd on the empty ${dataDir}: the cluster lists this member, which joins it for the first time`);
      result.etcd = { initialClusterState: 'new', initialCluster: member.initialCluster };
      break;
    case 'restore':
    case 'restore-new-cluster':
      await restoreInPlace(options, result, empty, step, logger);
      break;
    case 'rejoin': {
      if (cluster?.state !== 'quorum') throw new Error('a rejoin needs a cluster with quorum');
      if (options.dryRun) {
        const old = findMember(cluster.members, member);
        if (old) step(`remove member ${old.name || member.name} (id ${old.id}) from the cluster`);
        if (!empty) step(`move ${dataDir} aside to ${dataDir}.bad-<time>`);
        step(`add ${member.name} (${member.initialAdvertisePeerUrls}) back as a learner`);
        step('start etcd with --initial-cluster-state existing, then promote it (etcd-validate promote)');
        break;
      }
      const rejoined = await rejoinAsLearner(options.cluster!, cluster, member, dataDir, logger, options.signal);
      if (rejoined.removedId)
        result.steps.push(`removed member ${member.name} (id ${rejoined.removedId}) from the cluster`);
      if (rejoined.movedAside) {
        result.movedAside = rejoined.movedAside;
        result.steps.push(`moved ${dataDir} aside to ${rejoined.movedAside}`);
      }
      result.learnerId = rejoined.learnerId;
      result.steps.push(`added ${member.name} back as a learner (id ${rejoined.learnerId})`);
      result.etcd = { initialClusterState: 'existing', initialCluster: rejoined.initialCluster };
      break;
    }
    default:
      step(`etcd must not start: ${decision.reason}`);
  }
  return result;
}

/** Moves the old data aside (if any) and restores into the data dir; on failure the old data comes back. */
async function restoreInPlace(
  options: BootstrapOptions,
  result: BootstrapResult,
  empty: boolean,
  step: (text: string) => void,
  logger: Logger,
): Promise<void> {
  const { dataDir, member } = options;
  const newCluster = result.case === 'restore-new-cluster';
  if (options.dryRun) {
    if (!empty) step(`move ${dataDir} aside to ${dataDir}.bad-<time>`);
    step(
      `restore the store's newest state into ${dataDir}${newCluster ? ` as member ${member.name} of a new cluster` : ''}`,
    );
  } else {
    const aside = empty ? undefined : await moveAside(dataDir);
    if (aside) {
      result.movedAside = aside;
      step(`moved ${dataDir} aside to ${aside}`);
    }
    let restored: RestoreResult;
    try {
      restored = await restore({
        store: options.store,
        dataDir,
        member,
        etcdBinDir: options.etcdBinDir,
        encryptionKeyFile: options.encryptionKeyFile,
        logger,
        signal: options.signal,
      });
    } catch (err) {
      if (aside) {
        await moveBack(aside, dataDir);
        logger.warn('the restore failed: the old data dir is back in place', { dataDir, reason: errorMessage(err) });
      }
      throw err;
    }
    result.restored = {
      revision: restored.revision,
      keys: restored.keys,
      snapshot: restored.snapshot,
      deltas: restored.deltas,
    };
    step(
      `restored revision ${restored.revision} (${restored.keys} keys) from ${restored.snapshot} and ${restored.deltas.length} deltas into ${dataDir}`,
    );
  }
  if (newCluster) result.etcd = { initialClusterState: 'new', initialCluster: member.initialCluster };
}

/**
 * A voting member etcd lists that has never run: it has not published its client URLs (a member of the first
 * `--initial-cluster` has its name from the start).
 */
function neverStarted(found: EtcdMember | undefined): boolean {
  return found !== undefined && !found.isLearner && found.clientUrls.length === 0;
}

type StoreForCheck = Awaited<ReturnType<typeof openStoreForCheck>>;

async function storeState(store: StoreForCheck): Promise<StoreState> {
  try {
    if ('unreachable' in store) throw store.unreachable;
    const snapshots = await listSnapshots(store);
    if (!snapshots.some((s) => s.kind === 'Full')) return { state: 'empty' };
    return { state: 'backup', newestRevision: snapshots.reduce((max, s) => Math.max(max, s.lastRevision), 0) };
  } catch (err) {
    return { state: 'unreachable', reason: errorMessage(err) };
  }
}
