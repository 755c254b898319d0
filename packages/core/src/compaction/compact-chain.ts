import { createReadStream, createWriteStream } from 'node:fs';
import { rm, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { storedRevisionDigest } from '../backup/revision-digest.js';
import { DEFAULT_LOCK_SETTLE_MS, MAINTENANCE_LOCK, withStoreLock } from '../backup/store-lock.js';
import { type RecoveredObject, versionOf } from '../backup/stored-versions.js';
import { errorMessage, IntegrityError, OperationError } from '../common/errors.js';
import { freePort } from '../common/free-port.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { type EtcdBinaries, findEtcdBinaries } from '../etcd/etcd-binaries.js';
import type { KeyspaceFingerprint } from '../etcd/keyspace-fingerprint.js';
import type { MemberConfig } from '../etcd/snapshot-restore-command.js';
import { type CompressionPolicy, decompressor } from '../format/compression.js';
import { FullSnapshotCheck, SNAPSHOT_TRAILER } from '../format/full-snapshot-check.js';
import { parseSnapshotName } from '../format/snapshot-name.js';
import { MissingRevisionsError, restore } from '../restore/restore.js';
import { openStore } from '../store/location.js';
import type { SnapStore } from '../store/snapstore.js';
import { dbKeyspace } from '../validation/db-keyspace.js';
import { writeCompactedDb } from './compacted-db.js';
import { holdCompactedSnapshot } from './compacted-snapshot.js';
import { type CompactionPlan, foldGapError, planCompaction } from './compaction-plan.js';
import { CompactionScratch } from './compaction-scratch.js';
import { compactInEtcd, type EtcdCompactionOptions } from './etcd-compaction.js';
import { HeldSnapshot } from './held-snapshot.js';

export interface CompactOptions {
  /** The store's URL (`--store`): the restore opens its own connection to it. */
  store: string;
  /** Scratch space: the restored data dir, the compacted db and the new snapshot live in a folder inside. */
  workDir: string;
  /**
   * Defragment after compacting (ebr's default), so that the snapshot holds no free pages. Only the etcd engine
   * can skip it: the direct one writes a fresh db, which has none.
   */
  defragment: boolean;
  /** Longest the compacted db may take to be written (direct), or to stream from etcd (etcd engine). */
  snapshotTimeoutMs: number;
  /** Longest etcd's defragmentation may take (etcd engine). */
  defragTimeoutMs: number;
  compression: CompressionPolicy;
  /** The store's maintenance lock (docs/gc.md §5), held from the plan to the put: its expiry and settle time. */
  lockTtlMs: number;
  lockSettleMs?: number;
  etcdBinDir?: string;
  maxFetchers?: number;
  /** Keys that decrypt the chain and encrypt the new full snapshot (docs/encryption.md). */
  encryptionKeyFile?: string;
  /**
   * How the restored chain is compacted: `direct` (the default) writes the compacted, defragmented db
   * itself (compacted-db.ts); `etcd` has a private etcd do it, as ebr does (etcd-compaction.ts), which the
   * tests hold the direct one to.
   */
  engine?: CompactionEngine;
  logger?: Logger;
  signal?: AbortSignal;
}

export type CompactionEngine = 'direct' | 'etcd';

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
  /** Peak resident memory of this process (the replay thread included) and, with the etcd engine, of etcd. */
  peakRssBytes: number;
  etcdPeakRssBytes?: number;
  /** Snapshots of the chain read from a version other than their current one (hidden or replaced since stored). */
  recovered?: RecoveredObject[];
}

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
 * Folds the store's newest chain into one new full snapshot at the chain's last revision: the chain is restored by
 * the restore library (plan, replay, verify: its keyspace fingerprint read from the db file) into a scratch data
 * dir, its db compacted at that revision and defragmented into a new db file (compacted-db.ts, no etcd), and the
 * snapshot made of it is checked (etcd's sha256 trailer, its revision, and the keyspace fingerprint read from the
 * snapshot's db equal to the restored chain's) before it is stored, atomically, under ebr's name for a full
 * snapshot. It only adds that one object: the sidecar's deltas after the chain's last revision continue the new full
 * snapshot as they did the old chain, and nothing is deleted. The store's maintenance lock is held from the plan to
 * the put, so that gc deletes nothing the compaction reads; a lock held by another fails at once (StoreLockedError).
 * Nothing to fold: NothingToFoldError.
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
        logger: options.logger,
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
    }).catch((err) => {
      // the plan's chain had no gap: this is an older one the restore fell back to; etcd-restore's advice does not apply
      throw err instanceof MissingRevisionsError ? foldGapError(err.store, err.chain, err.gap, true) : err;
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
    const plain = join(scratch, 'compacted.db');
    const { etcdPeakRssBytes } = await compactRestored(options, {
      binaries,
      dataDir,
      member,
      peerPort,
      scratch,
      revision,
      file: plain,
    });
    // Its last revision's digest, as every full snapshot records it, so that the sidecar's history check can tell
    // whether etcd holds it (store-history.ts): the events the chain's last snapshot holds at that revision.
    const revisionDigest = await storedRevisionDigest(ctx.store, plan.chain.deltas.at(-1) ?? plan.chain.full, scratch, {
      signal: options.signal,
    });
    const compacted = await holdCompactedSnapshot(plain, held, {
      revision,
      revisionDigest,
      compression: options.compression,
      final: plan.final,
      etcdVersion: binaries.version,
      logger,
      signal: options.signal,
    });
    logger.info('verifying the compacted snapshot', { name: held.name });
    const stored = await verifyHeld(held, fingerprint, { scratch, revision, signal: options.signal });
    options.signal?.throwIfAborted();
    await assertChainStillStored(ctx.store, plan);
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
      ...(etcdPeakRssBytes !== undefined ? { etcdPeakRssBytes } : {}),
      ...(restored.recovered ? { recovered: restored.recovered } : {}),
    };
  } finally {
    await workspace.clear();
  }
}

/**
 * The chain folded is still the store's: every snapshot of it is where the plan found it. A fork set aside since
 * (under an older version that took no lock) would otherwise get a full snapshot of the abandoned history back.
 */
async function assertChainStillStored(store: SnapStore, plan: CompactionPlan): Promise<void> {
  for (const entry of [plan.chain.full, ...plan.chain.deltas]) {
    if ((await store.stat(entry.name, versionOf(entry)))?.size !== entry.size) {
      throw new OperationError(
        `${store.location}: ${entry.name}, part of the chain folded, is no longer in the store as it was (set aside as an abandoned history?); nothing was stored: run etcd-compact again`,
      );
    }
  }
}

/**
 * The restored db compacted at the chain's last revision and defragmented, into `file` (an etcd snapshot file:
 * the db and its sha256 trailer): written directly (compacted-db.ts), or by a private etcd (`engine: 'etcd'`).
 * `--etcd-snapshot-timeout` bounds either.
 */
async function compactRestored(
  options: CompactOptions,
  ctx: Omit<EtcdCompactionOptions, keyof CompactOptions | 'snapshotTimeoutMs'> & { file: string },
): Promise<{ etcdPeakRssBytes?: number }> {
  if (options.engine === 'etcd') return compactInEtcd({ ...options, ...ctx });
  const logger = options.logger ?? silentLogger;
  logger.info('compacting the history', { revision: ctx.revision, engine: 'direct' });
  const timeout = AbortSignal.timeout(options.snapshotTimeoutMs);
  const written = await writeCompactedDb(join(ctx.dataDir, 'member', 'snap', 'db'), ctx.file, {
    revision: ctx.revision,
    tmpDir: ctx.scratch,
    signal: options.signal ? AbortSignal.any([options.signal, timeout]) : timeout,
    logger,
  }).catch((err) => {
    if (!timeout.aborted || options.signal?.aborted) throw err;
    throw new OperationError(
      `writing the compacted db took longer than --etcd-snapshot-timeout (${options.snapshotTimeoutMs / 1000} s); nothing was stored: raise the timeout`,
    );
  });
  logger.info('compacted db written', {
    dbBytes: written.dbBytes,
    keptRows: written.keptRows,
    droppedRows: written.droppedRows,
  });
  return {};
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
  const check = new FullSnapshotCheck('the compacted snapshot', { spillDir: ctx.scratch });
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
