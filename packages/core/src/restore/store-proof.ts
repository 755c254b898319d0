import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type DrillOutcome, nextProofRecord, readProofRecord, writeProofRecord } from '../backup/proof-record.js';
import type { RecoveredObject } from '../backup/stored-versions.js';
import { errorMessage, StewardError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { PROOF_EXIT_CODES, ProofError, type ProofReport } from '../proof/proof-verdict.js';
import { openStore } from '../store/location.js';
import { MissingRevisionsError, restore } from './restore.js';

export interface StoreProofOptions {
  store: string;
  encryptionKeyFile?: string;
  /** The live cluster the store backs up. */
  against: EtcdConnection;
  /** Where the scratch folder goes (the restored data dir: about twice the db). */
  tempDir: string;
  etcdBinDir?: string;
  /** Write the outcome to the store's drill record (backup/proof-record.ts) for the sidecar's metrics. */
  record?: boolean;
  logger?: Logger;
  signal?: AbortSignal;
}

export interface StoreProofResult {
  store: string;
  outcome: DrillOutcome;
  /** The chain restored, and the revision it reached. */
  snapshot?: string;
  deltas?: number;
  revision?: number;
  keys?: number;
  proof?: ProofReport;
  reason?: string;
  restoreMs?: number;
  /** Snapshots the restore read from an older version (hidden or replaced since they were stored). */
  recovered?: RecoveredObject[];
  exitCode: number;
}

/** A member for the scratch restore: its data dir is read, never started. */
const SCRATCH_MEMBER = {
  name: 'proof',
  initialCluster: 'proof=http://127.0.0.1:2380',
  initialClusterToken: 'etcd-steward-proof',
  initialAdvertisePeerUrls: 'http://127.0.0.1:2380',
};

/**
 * The restore drill: the store's newest chain restored into a scratch folder (as etcd-restore restores it,
 * verified), proven against the live cluster (docs/proof.md), and the scratch folder removed on every exit path.
 * A store that does not restore, or a result that is not proven, is an outcome with its exit code
 * (PROOF_EXIT_CODES), not an error; with `record`, the outcome goes to the store's drill record either way.
 */
export async function proveStore(options: StoreProofOptions): Promise<StoreProofResult> {
  const logger = options.logger ?? silentLogger;
  const scratch = await mkdtemp(join(options.tempDir, 'etcd-proof-'));
  let result: StoreProofResult;
  const started = Date.now();
  try {
    const restored = await restore({
      store: options.store,
      encryptionKeyFile: options.encryptionKeyFile,
      dataDir: join(scratch, 'data'),
      member: SCRATCH_MEMBER,
      etcdBinDir: options.etcdBinDir,
      proveAgainst: options.against,
      logger,
      signal: options.signal,
    });
    result = {
      store: options.store,
      outcome: 'proven',
      snapshot: restored.snapshot,
      deltas: restored.deltas.length,
      revision: restored.revision,
      keys: restored.keys,
      ...(restored.proof ? { proof: restored.proof } : {}),
      restoreMs: restored.durationMs,
      ...(restored.recovered?.length ? { recovered: restored.recovered } : {}),
      exitCode: PROOF_EXIT_CODES.proven,
    };
  } catch (err) {
    if (options.signal?.aborted) throw err;
    if (err instanceof ProofError) {
      result = {
        store: options.store,
        outcome: err.report.verdict as DrillOutcome,
        revision: err.report.revision,
        proof: err.report,
        reason: err.report.reason,
        restoreMs: Date.now() - started,
        exitCode: err.report.exitCode,
      };
    } else if (err instanceof MissingRevisionsError) {
      result = {
        store: options.store,
        outcome: 'not-restorable',
        reason: err.message,
        exitCode: PROOF_EXIT_CODES.notRestorable,
      };
    } else {
      // The drill's own failure is recorded too, but what failed is what the caller hears about.
      if (options.record) {
        await record(options, { outcome: 'failed', reason: errorMessage(err) }, logger).catch((recordErr) =>
          logger.error(errorMessage(recordErr)),
        );
      }
      throw err;
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  if (options.record) await record(options, result, logger);
  return result;
}

async function record(
  options: StoreProofOptions,
  drill: { outcome: DrillOutcome; revision?: number; reason?: string },
  logger: Logger,
): Promise<void> {
  const store = await openStore(options.store, { encryptionKeyFile: options.encryptionKeyFile });
  try {
    const previous = await readProofRecord(store).catch((err) => {
      logger.warn('the drill record could not be read; starting a new one', { reason: errorMessage(err) });
      return undefined;
    });
    await writeProofRecord(store, nextProofRecord(previous, drill));
  } catch (err) {
    throw new StewardError(`the drill's outcome (${drill.outcome}) could not be recorded: ${errorMessage(err)}`, 1, {
      cause: err,
    });
  } finally {
    await store.close?.();
  }
}
