import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { forkFolder, setAside } from '../backup/set-aside.js';
import { listSnapshots } from '../backup/snapshot-catalog.js';
import type { SnapshotChain } from '../backup/snapshot-chain.js';
import type { RecoveredObject } from '../backup/stored-versions.js';
import { errorMessage, OperationError } from '../common/errors.js';
import { fsyncPath } from '../common/fsync-path.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { type EtcdBinaries, findEtcdBinaries } from '../etcd/etcd-binaries.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import type { KeyspaceFingerprint } from '../etcd/keyspace-fingerprint.js';
import { layOutAroundEmptyDb, moveDbIntoLayout } from '../etcd/member-layout.js';
import { type MemberConfig, refuseDowngrade } from '../etcd/snapshot-restore-command.js';
import { proveDbAgainstCluster } from '../proof/live-proof.js';
import { ProofError, type ProofReport } from '../proof/proof-verdict.js';
import { UnusableFullSnapshotError } from '../replay/chain-source.js';
import type { ChainReplayResult } from '../replay/replay-chain.js';
import { BaseNotAsPreparedError } from '../replay/replay-engine.js';
import type { TxnLimits } from '../replay/replay-events.js';
import { openStore } from '../store/location.js';
import { replanWhileChanging } from './changing-store.js';
import { DataDirTarget } from './data-dir.js';
import { type ReplayOutcome, replayInChild } from './isolated-replay.js';
import { noSpaceError } from './no-space.js';
import { passOverFull, RecoveredObjects } from './recovered-objects.js';
import type { ReplayMethod } from './replay-method.js';
import { planRestore, type RestorePlan, type RestoreRequest, refuseTimeDoubt, timeDoubtJson } from './restore-plan.js';
import { type VerifyMethod, verifyResult } from './result-verification.js';

export interface RestoreOptions extends RestoreRequest {
  /** The store's URL (`--store`): the restore opens its own connection to it. */
  store: string;
  dataDir: string;
  member: MemberConfig;
  force?: boolean;
  /** On a damaged or missing delta, restore up to the last good revision and report what was lost. */
  allowPartial?: boolean;
  maxFetchers?: number;
  limits?: TxnLimits;
  leaseTtl?: number;
  replay?: ReplayMethod;
  /** How the result proves itself before it is swapped in (default `check`). */
  verify?: VerifyMethod;
  etcdBinDir?: string;
  /** Keys that decrypt encrypted snapshots (docs/encryption.md). */
  encryptionKeyFile?: string;
  /**
   * The restored member goes on writing to this store: once the restore is in place, the snapshots past the
   * restored revision are set aside (set-aside.ts), so that the store's history is the one the cluster continues.
   */
  fork?: boolean;
  /**
   * Prove the result against this live cluster before it replaces the target (docs/proof.md): etcd's HashKV at
   * the restored revision must equal the result's. Otherwise a ProofError, with the verdict's exit code, and the
   * target stays as it was.
   */
  proveAgainst?: EtcdConnection;
  logger?: Logger;
  signal?: AbortSignal;
}

export interface RestoreResult {
  dataDir: string;
  revision: number;
  keys: number;
  /** The full snapshot the result starts from, and the deltas applied after it. */
  snapshot: string;
  deltas: string[];
  /** Newer full snapshots that failed verification, each with the reason. */
  skipped: Array<{ name: string; reason: string }>;
  /** Snapshots read from a version other than their current one: hidden or replaced since they were stored. */
  recovered?: RecoveredObject[];
  /** With --allow-partial: what could not be restored, and why. */
  lost?: { fromRevision: number; toRevision: number; delta?: string; reason: string };
  /** With --to-time and --allow-partial, in a stretch not watched live: the revisions the state may have been. */
  uncertain?: { known: { revision: number; at: string }; readBack: { from: number; to: number; firstSeenAt: string } };
  /** With --to-time: the delta whose times do not say whether they came live (ebr's, older ones). */
  timesUnrecorded?: string;
  /** With --fork: the snapshots past the restored revision, in the folder they were set aside to. */
  setAside?: { folder: string; snapshots: string[] };
  replay: ReplayMethod;
  verify: VerifyMethod;
  /** The restored keyspace's fingerprint, read from the db file (`--verify check`). */
  fingerprint?: KeyspaceFingerprint;
  /** With `proveAgainst`: the proof against the live cluster. */
  proof?: ProofReport;
  durationMs: number;
  /** This process's peak RSS, the replay thread's included. */
  peakRssBytes: number;
}

/**
 * Rebuilds a data dir from a store: the newest usable chain (full snapshot plus deltas), replayed up to the
 * target, laid out for the requested member as etcd's own restore tool lays it out, then verified. All work happens in
 * a scratch dir beside the target, which is replaced only once the result proved itself: it passes
 * etcd-validate's full check (or etcd starts and stops cleanly on it, `verify: 'etcd'`), and its revision and
 * key count are what the chain says. A snapshot removed meanwhile (gc, compaction) makes it plan again
 * (changing-store.ts).
 */
export function restore(options: RestoreOptions): Promise<RestoreResult> {
  return replanWhileChanging(() => restoreOnce(options), options.logger ?? silentLogger);
}

async function restoreOnce(options: RestoreOptions): Promise<RestoreResult> {
  const logger = options.logger ?? silentLogger;
  const started = Date.now();
  const { target, binaries, plan } = await checkAndPlan(options);
  const workDir = await target.prepare();
  const skipped: RestoreResult['skipped'] = [];
  const method = options.replay ?? 'direct';
  const recovered = new RecoveredObjects();
  try {
    for (const chain of plan.chains) {
      refuseGap(plan, chain, options.allowPartial);
      const lost = chain.gap
        ? { fromRevision: chain.gap.from, toRevision: chain.gap.to, reason: 'no delta holds them' }
        : undefined;
      logger.info('restoring', {
        full: chain.full.name,
        deltas: chain.deltas.length,
        toRevision: chain.lastRevision,
        replay: method,
      });
      let replayed: ReplayOutcome;
      await rm(join(workDir, 'replay'), { recursive: true, force: true }); // what a failed attempt left
      const replay = (prepare?: boolean) =>
        replayInChild(
          {
            storeUrl: options.store,
            encryptionKeyFile: options.encryptionKeyFile,
            chain,
            // the plan found the revision a time target reaches: the replay goes exactly there
            toRevision: options.toRevision ?? (plan.toTimeNanos !== undefined ? chain.lastRevision : undefined),
            workDir: join(workDir, 'replay'),
            engineDir: workDir,
            method,
            binaries,
            limits: options.limits,
            leaseTtl: options.leaseTtl,
            maxFetchers: options.maxFetchers ?? 4,
            allowPartial: options.allowPartial,
            inPlace: true,
            fed: true,
            prepare,
          },
          logger,
          options.signal,
          recovered.add,
        );
      try {
        replayed = await replay().catch(async (err: unknown) => {
          if (!(err instanceof BaseNotAsPreparedError)) throw err;
          // rare (a full snapshot of ours whose revision is not its name's): the whole chain again, the usual way
          logger.warn('the full snapshot was not as its name and metadata say; replaying again', {
            reason: err.message,
          });
          await rm(join(workDir, 'replay'), { recursive: true, force: true });
          return replay(false);
        });
      } catch (err) {
        if (!(err instanceof UnusableFullSnapshotError)) throw err;
        passOverFull(err, chain, plan.chains, { logger, named: options.snapshot !== undefined, skipped });
        continue;
      }
      options.signal?.throwIfAborted();
      const result = await finish(options, plan, chain, replayed, {
        binaries,
        target,
        workDir,
        logger,
        signal: options.signal,
      });
      const lostNow = replayed.stoppedBy
        ? {
            fromRevision: replayed.revision + 1,
            toRevision: plan.target.revision ?? plan.newestRevision,
            delta: replayed.stoppedBy.delta,
            reason: replayed.stoppedBy.reason,
          }
        : lost;
      if (lostNow) logger.warn('partial restore: revisions lost', lostNow);
      if (chain.timeDoubt)
        logger.warn('--to-time: the state then may be later than the restored one', timeDoubtJson(chain));
      const setAside = options.fork ? await setAsideLater(options, result.revision, logger) : undefined;
      return {
        ...result,
        ...(setAside ? { setAside } : {}),
        snapshot: chain.full.name,
        deltas: chain.deltas.slice(0, replayed.deltas).map((d) => d.name),
        skipped,
        ...recovered.report(chain, replayed.deltas, logger),
        ...(lostNow ? { lost: lostNow } : {}),
        ...timeDoubtJson(chain),
        replay: method,
        verify: options.verify ?? 'check',
        durationMs: Date.now() - started,
        peakRssBytes: process.resourceUsage().maxRSS * 1024,
      };
    }
    throw new OperationError(
      `no full snapshot in ${plan.store} passed verification (${skipped.map((s) => s.name).join(', ')}); nothing was restored`,
    );
  } catch (err) {
    // The child reports errors as messages: the code is in the text.
    if ((err as NodeJS.ErrnoException).code === 'ENOSPC' || /\bENOSPC\b/.test(errorMessage(err))) {
      await target.cleanup(); // first: the free space it reports is what the next attempt finds
      throw await noSpaceError(target.path, plan.chains[0]?.full, err);
    }
    throw err;
  } finally {
    await target.cleanup();
  }
}

/**
 * Sets the store's snapshots past `revision` aside (forks/), the fork a restore to an earlier revision makes when
 * its member goes on with the same store. Undefined when the store holds nothing past it.
 */
async function setAsideLater(
  options: RestoreOptions,
  revision: number,
  logger: Logger,
): Promise<RestoreResult['setAside']> {
  const store = await openStore(options.store, { encryptionKeyFile: options.encryptionKeyFile });
  try {
    if (!(await listSnapshots(store)).some((e) => e.lastRevision > revision)) return undefined;
    const folder = forkFolder(revision);
    const moved = await setAside(store, revision, folder, { signal: options.signal, logger });
    const snapshots = moved.map((m) => m.from);
    logger.info('set the snapshots past the restored revision aside: the store goes on from it', { folder, snapshots });
    return { folder, snapshots };
  } finally {
    await store.close?.();
  }
}

/**
 * Everything a restore checks before it works, and its plan: `--dry-run` is this alone, so that it fails
 * where the run would (an occupied data dir, no etcd binaries, a target the store cannot meet, exit 2) and
 * prints the chains the run will replay, to the revisions it will reach. It creates nothing.
 */
export async function checkAndPlan(
  options: RestoreOptions,
  dryRun = false,
): Promise<{ target: DataDirTarget; binaries: EtcdBinaries; plan: RestorePlan }> {
  const target = new DataDirTarget(options.dataDir);
  await target.check(options.force ?? false, { create: !dryRun });
  const binaries = await findEtcdBinaries(options.etcdBinDir);
  const store = await openStore(options.store, { encryptionKeyFile: options.encryptionKeyFile });
  const plan = await planRestore(store, options, options).finally(() => store.close?.());
  return { target, binaries, plan };
}

/**
 * A chain with revisions in no delta, or whose state at a --to-time moment the store cannot tell (the moment falls
 * where the sidecar did not watch live), restores only with --allow-partial. `--dry-run` asks this of the chain the
 * run starts with, so that its exit code is the run's.
 */
export function refuseGap(plan: RestorePlan, chain: SnapshotChain, allowPartial = false): void {
  if (allowPartial) return;
  if (chain.gap) throw new MissingRevisionsError(plan.store, chain, chain.gap);
  refuseTimeDoubt(plan, chain);
}

/** A chain misses revisions and the restore was not allowed to stop short: callers other than etcd-restore reword it. */
export class MissingRevisionsError extends OperationError {
  constructor(
    readonly store: string,
    readonly chain: SnapshotChain,
    readonly gap: { from: number; to: number },
  ) {
    super(
      `revisions ${gap.from}..${gap.to} are in no delta in ${store} (a delta is missing); nothing was restored. Pass --allow-partial to restore up to revision ${chain.lastRevision}`,
    );
  }
}

/** Where the member's data dir is made, in the work dir, before it is swapped in. */
function memberDataDir(workDir: string): string {
  return join(workDir, 'data');
}

/**
 * Lays the member's data dir out around the replayed db (etcd's own restore tool, on an empty db: see
 * member-layout.ts), proves it (result-verification.ts) and swaps it in. The db is synced while it is verified:
 * the verification reads what the page cache holds either way, and nothing is swapped in before both are done.
 * (The tool is not run beside the replay: its 64 MB WAL would then take disk space before the chain proved
 * usable.)
 */
async function finish(
  options: RestoreOptions,
  plan: RestorePlan,
  chain: SnapshotChain,
  replayed: ChainReplayResult,
  ctx: { binaries: EtcdBinaries; target: DataDirTarget; workDir: string; logger: Logger; signal?: AbortSignal },
): Promise<Pick<RestoreResult, 'dataDir' | 'revision' | 'keys' | 'fingerprint' | 'proof'>> {
  const revision = replayed.revision;
  const partial = replayed.stoppedBy !== undefined || chain.gap !== undefined;
  if (options.toRevision !== undefined && revision !== options.toRevision && !partial) {
    throw new OperationError(
      `the chain from ${chain.full.name} reached revision ${revision}, not ${options.toRevision}`,
    );
  }
  const dataDir = memberDataDir(ctx.workDir);
  ctx.logger.info('laying out the member data dir', { member: options.member.name, revision });
  const replayedDb = replayed.dbFile ?? replayed.snapshotFile!;
  refuseDowngrade(ctx.binaries, replayedDb); // before anything is laid out
  await layOutAroundEmptyDb(ctx.binaries, dataDir, options.member, { signal: ctx.signal });
  const db = await moveDbIntoLayout(ctx.binaries, replayedDb, dataDir);
  ctx.signal?.throwIfAborted();
  const method = options.verify ?? 'check';
  ctx.logger.info('verifying the result', { revision, verify: method });
  const synced = fsyncPath(db);
  synced.catch(() => {}); // awaited below; a failed verification reports its own error
  const verified = await verifyResult(method, dataDir, replayed, ctx);
  await synced;
  ctx.signal?.throwIfAborted();
  let proof: ProofReport | undefined;
  if (options.proveAgainst) {
    ctx.logger.info('proving the result against the live cluster', {
      revision,
      endpoints: options.proveAgainst.endpoints,
    });
    proof = await proveDbAgainstCluster({
      dbFile: join(dataDir, 'member', 'snap', 'db'),
      connection: options.proveAgainst,
      tmpDir: ctx.workDir,
      logger: ctx.logger,
      signal: ctx.signal,
    });
    if (proof.verdict !== 'proven') throw new ProofError(proof);
    ctx.logger.info('proven: the cluster hashes the restored revision as the result does', {
      revision,
      compactRevision: proof.compactRevision,
      members: proof.members.length,
    });
  }
  await ctx.target.swapIn(dataDir);
  ctx.logger.info('restored', {
    dataDir: ctx.target.path,
    revision,
    keys: verified.keys,
    store: plan.store,
    ...(verified.fingerprint ? { sha256: verified.fingerprint.sha256 } : {}),
  });
  return { dataDir: ctx.target.path, ...verified, ...(proof ? { proof } : {}) };
}
