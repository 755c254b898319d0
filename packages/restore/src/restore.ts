import { join } from 'node:path';
import {
  type CatalogEntry,
  IntegrityError,
  type Logger,
  type MemberConfig,
  OperationError,
  type SnapStore,
  dbFileRevision,
  fetchFullSnapshot,
  findEtcdBinaries,
  listSnapshots,
  runSnapshotRestore,
  silentLogger,
} from '@etcd-steward/core';
import { DataDirTarget } from './data-dir.js';

export interface RestoreOptions {
  store: SnapStore;
  dataDir: string;
  member: MemberConfig;
  force?: boolean;
  /** Restore this full snapshot (object name) instead of the newest. */
  snapshot?: string;
  etcdBinDir?: string;
  logger?: Logger;
  signal?: AbortSignal;
}

export interface RestoreResult {
  snapshot: string;
  revision: number;
  dataDir: string;
  /** Newer snapshots that were skipped because they failed verification. */
  skipped: Array<{ name: string; reason: string }>;
  durationMs: number;
}

/**
 * Rebuilds a data dir from the newest full snapshot that verifies (falling back to older ones when the
 * newest is damaged), with etcd's own restore tool, in a scratch dir that replaces the target only when
 * everything checked out.
 */
export async function restore(options: RestoreOptions): Promise<RestoreResult> {
  const logger = options.logger ?? silentLogger;
  const started = Date.now();
  const target = new DataDirTarget(options.dataDir);
  await target.check(options.force ?? false);
  const binaries = await findEtcdBinaries(options.etcdBinDir);
  const candidates = await fullSnapshotCandidates(options.store, options.snapshot);
  const workDir = await target.prepare();
  const skipped: RestoreResult['skipped'] = [];
  try {
    for (const entry of candidates) {
      const snapshotFile = join(workDir, 'snapshot.db');
      logger.info('fetching full snapshot', { name: entry.name, revision: entry.lastRevision, bytes: entry.size });
      try {
        await fetchFullSnapshot(options.store, entry, snapshotFile, { logger, signal: options.signal });
      } catch (err) {
        if (!(err instanceof IntegrityError) || options.snapshot) throw err;
        logger.warn('full snapshot failed verification; trying the previous one', { name: entry.name, reason: err.message });
        skipped.push({ name: entry.name, reason: err.message });
        continue;
      }
      const dataDir = join(workDir, 'data');
      await runSnapshotRestore(binaries, snapshotFile, dataDir, options.member);
      const revision = await dbFileRevision(join(dataDir, 'member', 'snap', 'db'));
      if (revision !== entry.lastRevision) {
        throw new OperationError(`the restored db is at revision ${revision}, expected ${entry.lastRevision}`);
      }
      await target.swapIn(dataDir);
      logger.info('restored', { dataDir: target.path, revision });
      return { snapshot: entry.name, revision, dataDir: target.path, skipped, durationMs: Date.now() - started };
    }
    throw new OperationError(
      `no full snapshot in ${options.store.location} passed verification (${skipped.map((s) => s.name).join(', ')}); nothing was restored`,
    );
  } finally {
    await target.cleanup();
  }
}

async function fullSnapshotCandidates(store: SnapStore, chosen?: string): Promise<CatalogEntry[]> {
  const fulls = (await listSnapshots(store)).filter((e) => e.kind === 'Full').reverse();
  if (chosen) {
    const entry = fulls.find((e) => e.name === chosen || e.name.endsWith(`/${chosen}`));
    if (!entry) throw new OperationError(`--snapshot ${chosen}: no such full snapshot in ${store.location}`);
    return [entry];
  }
  if (fulls.length === 0) {
    throw new OperationError(`no full snapshot in ${store.location}: check --store, or take one with etcd-snapshot save`);
  }
  return fulls;
}
