import { createReadStream, createWriteStream } from 'node:fs';
import { readFile, rm, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { DEFAULT_LOCK_SETTLE_MS, MAINTENANCE_LOCK, withStoreLock } from '../backup/store-lock.js';
import { takeFullSnapshot } from '../backup/take-full-snapshot.js';
import { errorMessage, IntegrityError, OperationError } from '../common/errors.js';
import { freePort } from '../common/free-port.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { type EtcdBinaries, findEtcdBinaries } from '../etcd/etcd-binaries.js';
import { createEtcdClient } from '../etcd/etcd-client.js';
import { briefGoProgramEnv } from '../etcd/go-memory.js';
import type { KeyspaceFingerprint } from '../etcd/keyspace-fingerprint.js';
import { recordChildPid } from '../etcd/orphan-processes.js';
import type { MemberConfig } from '../etcd/snapshot-restore-command.js';
import { EtcdProcess } from '../etcd/spawned-etcd.js';
import { type CompressionPolicy, decompressor } from '../format/compression.js';
import { FullSnapshotCheck, SNAPSHOT_TRAILER } from '../format/full-snapshot-check.js';
import { parseSnapshotName } from '../format/snapshot-name.js';
import { restore } from '../restore/restore.js';
import { openStore } from '../store/location.js';
import type { SnapStore } from '../store/snapstore.js';
import { dbKeyspace } from '../validation/db-keyspace.js';
import { type CompactionPlan, planCompaction } from './compaction-plan.js';
import { CompactionScratch } from './compaction-scratch.js';
import { HeldSnapshot } from './held-snapshot.js';

export interface CompactOptions {
  /** The store's URL (`--store`): the restore's replay process opens its own connection to it. */
  store: string;
  /** Scratch space: the restored data dir, the private etcd and the new snapshot live in a folder inside. */
  workDir: string;
  /** Defragment after compacting (ebr's default), so that the snapshot holds no free pages. */
  defragment: boolean;
  snapshotTimeoutMs: number;
  defragTimeoutMs: number;
  compression: CompressionPolicy;
  /** The store's maintenance lock (docs/gc.md §5), held from the plan to the put: its expiry and settle time. */
  lockTtlMs: number;
  lockSettleMs?: number;
  etcdBinDir?: string;
  maxFetchers?: number;
  /** Keys that decrypt the chain and encrypt the new full snapshot (docs/encryption.md). */
  encryptionKeyFile?: string;
  logger?: Logger;
  signal?: AbortSignal;
}

export interface CompactionResult {
  store: string;
  /** The new full snapshot's object name. */
  name: string;
  revision: number;
  final: boolean;
  /** The chain folded: its objects, the revisions its deltas held, its stored bytes. */
  objects: string[];
  revisionsFolded: number;
  chainBytes: number;
  /** The new snapshot: as stored, and its db as etcd sent it. */
  snapshotBytes: number;
  dbBytes: number;
  keys: number;
  durationMs: number;
  /** Peak resident memory of this process, of the replay (a child process) and of the private etcd. */
  peakRssBytes: number;
  replayPeakRssBytes: number;
  etcdPeakRssBytes?: number;
}

/** etcd reads its whole db at start-up, slowly under a tight memory limit (snapshot-inspection.ts). */
const START_TIMEOUT_MS = 10 * 60_000;
const STOP_GRACE_MS = 30_000;

/**
 * Everything a compaction checks before it works, and its plan: `--dry-run` is this alone. Bad settings (no
 * etcd binaries) are usage errors; the store is listed, nothing is created.
 */
export async function checkCompaction(
  options: Pick<CompactOptions, 'store' | 'etcdBinDir' | 'encryptionKeyFile' | 'signal'>,
): Promise<{ binaries: EtcdBinaries; plan: CompactionPlan }> {
  const binaries = await findEtcdBinaries(options.etcdBinDir);
  const store = await openStore(options.store, { encryptionKeyFile: options.encryptionKeyFile });
  const plan = await planCompaction(store, { signal: options.signal }).finally(() => store.close?.());
  return { binaries, plan };
}

/** A plan with nothing to fold, found under the lock (another compaction may just have folded the chain). */
export class NothingToFoldError extends OperationError {
  constructor(readonly plan: CompactionPlan) {
    super(plan.nothingToFold ?? 'nothing to fold');
  }
}

/**
 * Folds the store's newest chain into one new full snapshot at the chain's last revision: the chain is
 * restored by the restore library (plan, replay, verify: its keyspace fingerprint read from the db file) into a
 * scratch data dir, a private etcd on it compacts its history at that revision and defragments, and the
 * snapshot it sends is checked without etcd (etcd's sha256 trailer, its revision, and the keyspace fingerprint
 * read from the snapshot's db equal to the restored chain's) before it is stored, atomically, under ebr's name
 * for a full snapshot. It only adds that one object: the sidecar's deltas after the chain's last revision
 * continue the new full snapshot as they did the old chain, and nothing is deleted. The store's maintenance
 * lock is held from the plan to the put, so that gc deletes nothing the compaction reads; a lock held by
 * another fails at once (StoreLockedError). Nothing to fold: NothingToFoldError.
 */
export async function compactChain(options: CompactOptions, binaries?: EtcdBinaries): Promise<CompactionResult> {
  const started = Date.now();
  const etcdBinaries = binaries ?? (await findEtcdBinaries(options.etcdBinDir));
  const store = await openStore(options.store, { encryptionKeyFile: options.encryptionKeyFile });
  try {
    (options.logger ?? silentLogger).info('taking the store lock', { lock: MAINTENANCE_LOCK, store: store.location });
    return await withStoreLock(
      store,
      MAINTENANCE_LOCK,
      async (signal) => {
        const plan = await planCompaction(store, { signal });
        if (plan.nothingToFold) throw new NothingToFoldError(plan);
        return await foldChain({ ...options, signal }, { store, binaries: etcdBinaries, plan, started });
      },
      {
        ttlMs: options.lockTtlMs,
        settleMs: options.lockSettleMs ?? DEFAULT_LOCK_SETTLE_MS,
        purpose: 'etcd-compact',
        signal: options.signal,
      },
    );
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOSPC' || /\bENOSPC\b/.test(errorMessage(err))) {
      throw new OperationError(
        `no space left on the device of --work-dir ${options.workDir}: a compaction needs about three times the db size there; nothing was stored`,
        { cause: err },
      );
    }
    throw err;
  } finally {
    await store.close?.();
  }
}

async function foldChain(
  options: CompactOptions,
  ctx: { store: SnapStore; binaries: EtcdBinaries; plan: CompactionPlan; started: number },
): Promise<CompactionResult> {
  const logger = options.logger ?? silentLogger;
  const { binaries, plan } = ctx;
  const revision = plan.chain.lastRevision;
  const workspace = new CompactionScratch(options.workDir, plan.store);
  const { path: scratch, dataDir } = workspace;
  await workspace.prepare();
  try {
    const peerPort = await freePort();
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    const member: MemberConfig = {
      name: 'compact',
      initialCluster: `compact=${peerUrl}`,
      initialClusterToken: 'etcd-steward-compact',
      initialAdvertisePeerUrls: peerUrl,
    };
    logger.info('restoring the chain to fold', {
      full: plan.chain.full.name,
      deltas: plan.chain.deltas.length,
      revision,
    });
    const restored = await restore({
      store: options.store,
      dataDir,
      member,
      force: true,
      toRevision: revision,
      verify: 'check',
      maxFetchers: options.maxFetchers,
      etcdBinDir: options.etcdBinDir,
      encryptionKeyFile: options.encryptionKeyFile,
      logger,
      signal: options.signal,
    });
    // the restore's check read it from the db file; the same read where it did not
    const fingerprint =
      restored.fingerprint ?? dbKeyspace(join(dataDir, 'member', 'snap', 'db'), { tmpDir: scratch }).fingerprint;
    if (fingerprint.revision !== revision) {
      throw new OperationError(
        `the restored chain is at revision ${fingerprint.revision}, not ${revision} as planned; nothing was stored`,
      );
    }
    const held = new HeldSnapshot(ctx.store, join(scratch, 'snapshot'));
    const compacted = await compactInEtcd({ ...options, binaries, plan, dataDir, scratch, member, peerPort, held });
    logger.info('verifying the compacted snapshot', { name: held.name });
    const stored = await verifyHeld(held, fingerprint, { scratch, revision, signal: options.signal });
    options.signal?.throwIfAborted();
    logger.info('storing the compacted snapshot', { name: held.name, bytes: stored.bytes });
    await held.storeIn({ signal: options.signal });
    logger.info('compacted', { name: held.name, revision, revisionsFolded: plan.revisions, store: plan.store });
    return {
      store: plan.store,
      name: held.name,
      revision,
      final: plan.final,
      objects: [plan.chain.full, ...plan.chain.deltas].map((e) => e.name),
      revisionsFolded: plan.revisions,
      chainBytes: plan.bytes,
      snapshotBytes: stored.bytes,
      dbBytes: compacted.dbBytes,
      keys: fingerprint.keys,
      durationMs: Date.now() - ctx.started,
      peakRssBytes: process.resourceUsage().maxRSS * 1024,
      replayPeakRssBytes: restored.replayPeakRssBytes,
      ...(compacted.etcdPeakRssBytes !== undefined ? { etcdPeakRssBytes: compacted.etcdPeakRssBytes } : {}),
    };
  } finally {
    await workspace.clear();
  }
}

/**
 * Starts a private etcd on the restored data dir; compacts the history at the chain's last revision
 * (physically, so the snapshot holds no old revisions), defragments when asked, and takes the snapshot into
 * `held`. etcd is stopped before the snapshot is checked, so the two never add up.
 */
async function compactInEtcd(
  ctx: CompactOptions & {
    binaries: EtcdBinaries;
    plan: CompactionPlan;
    dataDir: string;
    scratch: string;
    member: MemberConfig;
    peerPort: number;
    held: HeldSnapshot;
  },
): Promise<{ dbBytes: number; etcdPeakRssBytes?: number }> {
  const logger = ctx.logger ?? silentLogger;
  const revision = ctx.plan.chain.lastRevision;
  const etcd = await EtcdProcess.start({
    binaries: ctx.binaries,
    name: ctx.member.name,
    dataDir: ctx.dataDir,
    logFile: join(ctx.scratch, 'etcd.log'),
    peerPort: ctx.peerPort,
    initialCluster: ctx.member.initialCluster,
    clusterToken: ctx.member.initialClusterToken,
    throwaway: true,
    env: briefGoProgramEnv(),
  });
  const client = createEtcdClient({ endpoints: [etcd.clientUrl] });
  try {
    await recordChildPid(ctx.scratch, 'compact-etcd', etcd.pid);
    logger.info('starting etcd on the restored chain', { dataDir: ctx.dataDir });
    await etcd.waitHealthy(START_TIMEOUT_MS);
    ctx.signal?.throwIfAborted();
    logger.info('compacting the history', { revision });
    await client.kv.compact({ revision, physical: true });
    if (ctx.defragment) {
      logger.info('defragmenting', {});
      await withTimeout(client.maintenance.defragment({}), ctx.defragTimeoutMs, '--etcd-defrag-timeout');
    }
    ctx.signal?.throwIfAborted();
    const timeout = AbortSignal.timeout(ctx.snapshotTimeoutMs);
    const saved = await takeFullSnapshot({
      connection: { endpoints: [etcd.clientUrl] },
      store: ctx.held,
      compression: ctx.compression,
      tempDir: ctx.scratch,
      final: ctx.plan.final,
      logger,
      signal: ctx.signal ? AbortSignal.any([ctx.signal, timeout]) : timeout,
    }).catch((err) => {
      if (!timeout.aborted || ctx.signal?.aborted) throw err;
      throw new OperationError(
        `the snapshot of the compacted etcd took longer than --etcd-snapshot-timeout (${ctx.snapshotTimeoutMs / 1000} s); nothing was stored: raise the timeout`,
      );
    });
    if (saved.revision !== revision) {
      throw new IntegrityError(
        `the compacted snapshot holds revision ${saved.revision}, not the chain's ${revision}; nothing was stored`,
      );
    }
    const etcdPeakRssBytes = await peakRss(etcd.pid);
    return { dbBytes: saved.dbSize, etcdPeakRssBytes };
  } finally {
    client.close();
    await etcd.stop(STOP_GRACE_MS);
  }
}

/**
 * Checks the held snapshot as a restore will read it: decompressed, etcd's sha256 trailer and revision; then its
 * db, a bbolt file like any etcd db, read without etcd (validation/db-keyspace.ts): its revision and keyspace
 * fingerprint equal to the restored chain's.
 */
async function verifyHeld(
  held: HeldSnapshot,
  expected: KeyspaceFingerprint,
  ctx: { scratch: string; revision: number; signal?: AbortSignal },
): Promise<{ bytes: number }> {
  const ref = parseSnapshotName(held.name);
  if (!ref) throw new OperationError(`${held.name} is not a snapshot name`);
  const file = join(ctx.scratch, 'verify.db');
  const check = new FullSnapshotCheck('the compacted snapshot');
  try {
    await pipeline(createReadStream(held.path), decompressor(ref.compression), check, createWriteStream(file), {
      signal: ctx.signal,
    });
    const facts = check.facts();
    if (facts.revision !== ctx.revision) {
      throw new IntegrityError(
        `the compacted snapshot holds revision ${facts.revision}, not the chain's ${ctx.revision}; nothing was stored`,
      );
    }
    await truncate(file, facts.size - SNAPSHOT_TRAILER);
    const got = dbKeyspace(file, { tmpDir: ctx.scratch }).fingerprint;
    if (got.revision !== expected.revision || got.keys !== expected.keys || got.sha256 !== expected.sha256) {
      throw new IntegrityError(
        `the compacted snapshot does not hold the chain's keyspace (revision ${got.revision} with ${got.keys} keys, expected revision ${expected.revision} with ${expected.keys}, or their values differ); nothing was stored`,
      );
    }
  } finally {
    await rm(file, { force: true });
  }
  return { bytes: (await stat(held.path)).size };
}

async function withTimeout<T>(work: Promise<T>, ms: number, flag: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new OperationError(`etcd did not finish within ${flag} (${ms / 1000} s); nothing was stored: raise it`)),
      ms,
    );
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** A child's peak resident memory (Linux `VmHWM`), read before it ends; undefined where /proc has none. */
async function peakRss(pid: number | undefined): Promise<number | undefined> {
  if (pid === undefined) return undefined;
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /^VmHWM:\s+(\d+) kB/m.exec(status)?.[1];
  return kb === undefined ? undefined : Number(kb) * 1024;
}
