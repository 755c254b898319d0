import { fetchFullSnapshot, isUnusableFullSnapshot } from '../backup/fetch-full-snapshot.js';
import { type CatalogEntry, catalogStore } from '../backup/snapshot-catalog.js';
import { MAINTENANCE_LOCK, withStoreLock } from '../backup/store-lock.js';
import { readThroughVersions } from '../backup/stored-versions.js';
import { errorMessage, OperationError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { EncryptionKeyError, UnknownKeyIdError } from '../format/encryption/envelope-format.js';
import { cleanupIncompleteUploads } from '../store/incomplete-uploads.js';
import { ObjectNotFoundError, type SnapStore } from '../store/snapstore.js';
import { type DeleteOutcome, deleteObjects } from './delete-objects.js';
import type { FullVerdicts } from './full-verdicts.js';
import { planRetention, type RetentionPlan, type RetentionPolicy } from './retention-plan.js';

export interface PruneOptions {
  policy: RetentionPolicy;
  /** Plan and report, delete nothing (and take no lock: nothing is changed). */
  dryRun: boolean;
  /** Deletes in flight at once, and tries per object. */
  concurrency: number;
  attempts: number;
  /** The store lock's expiry (it is renewed while the run lasts) and settle wait (store-lock.ts). */
  lockTtlMs: number;
  lockSettleMs?: number;
  /** Multipart uploads begun longer ago than this are aborted (S3): what killed writers left. */
  incompleteUploadMaxAgeMs: number;
  now?: () => Date;
  logger?: Logger;
  signal?: AbortSignal;
  /** For the lock's holder description: etcd-gc, or the sidecar. */
  purpose?: string;
  /** Verdicts on full snapshots from earlier runs, for a gc that runs again and again (the sidecar's). */
  verdicts?: FullVerdicts;
}

export interface PruneReport {
  dryRun: boolean;
  plan: RetentionPlan;
  /** By object name; only objects a delete was tried on. */
  outcomes: Map<string, DeleteOutcome>;
  /** Aborted multipart uploads; undefined for stores that have none, or in a dry run. */
  uploadsAborted?: number;
}

/**
 * One run of garbage collection on a store: under the store's maintenance lock, the catalog, the newest full
 * that verifies, the plan, then the deletions: fulls first, then deltas and chunks, so that a run killed midway
 * leaves deltas without their full (deleted by the next run) rather than a full without some of its deltas.
 */
export async function pruneStore(store: SnapStore, options: PruneOptions): Promise<PruneReport> {
  const run = async (signal: AbortSignal | undefined): Promise<PruneReport> => {
    const logger = options.logger ?? silentLogger;
    // with versions, as a restore lists it: gc keeps what a restore would read, and deletes a name's versions
    const catalog = await catalogStore(store, { versions: true });
    if (catalog.versionsUnreadable) logger.warn(`${store.location}: ${catalog.versionsUnreadable}`);
    const verified = await newestVerifiedFull(store, catalog.snapshots, logger, signal, options.verdicts);
    const now = (options.now ?? (() => new Date()))();
    const plan = planRetention(catalog, options.policy, { now, restorableFull: verified.name });
    plan.warnings.unshift(...verified.warnings);
    for (const warning of plan.warnings) logger.warn(warning);
    const outcomes = new Map<string, DeleteOutcome>();
    if (options.dryRun) return { dryRun: true, plan, outcomes };
    const doomed = plan.decisions.filter((d) => d.action === 'delete');
    let done = 0;
    let reported = 0;
    for (const phase of [doomed.filter((d) => d.kind === 'Full'), doomed.filter((d) => d.kind !== 'Full')]) {
      const outcome = await deleteObjects(
        store,
        phase.map((d) => d.name),
        {
          concurrency: options.concurrency,
          attempts: options.attempts,
          signal,
          onOutcome: (o) => {
            done++;
            if (Date.now() - reported >= 1000 || done === doomed.length) {
              reported = Date.now();
              logger.progress('delete', { objects: done, of: doomed.length });
            }
            if (o.result !== 'deleted')
              logger.warn(`${o.name}: ${o.result === 'immutable' ? 'immutable, skipped' : 'not deleted'}`, {
                reason: o.reason,
                attempts: o.attempts,
              });
          },
        },
      );
      for (const o of outcome) outcomes.set(o.name, o);
    }
    signal?.throwIfAborted();
    const uploadsAborted = await cleanupIncompleteUploads(store, options.incompleteUploadMaxAgeMs);
    return { dryRun: false, plan, outcomes, uploadsAborted };
  };
  if (options.dryRun) return run(options.signal);
  return withStoreLock(store, MAINTENANCE_LOCK, run, {
    ttlMs: options.lockTtlMs,
    settleMs: options.lockSettleMs,
    purpose: options.purpose ?? 'garbage collection',
    signal: options.signal,
    logger: options.logger,
  });
}

/**
 * The newest full snapshot that verifies (its stored digest and etcd's sha256 trailer, streamed, nothing
 * written; with a key, its tags too): the start of the chain a restore would take, which no rule may delete. A
 * damaged full is passed over, as restore passes it over. With fulls in the store and none that verifies, nothing
 * is deleted. Without a key file, gc cannot judge an encrypted full: it is kept as the start of the chain unverified
 * (a damaged one would then be kept, and the rules decide the older fulls as usual); one whose key id the key file
 * lacks is passed over. `warnings` says which fulls were passed over or kept unverified, and why.
 */
async function newestVerifiedFull(
  store: SnapStore,
  snapshots: readonly CatalogEntry[],
  logger: Logger,
  signal: AbortSignal | undefined,
  verdicts: FullVerdicts | undefined,
): Promise<{ name?: string; warnings: string[] }> {
  const fulls = snapshots.filter((e) => e.kind === 'Full').reverse();
  verdicts?.keepOnly(fulls.map((f) => f.name));
  const warnings: string[] = [];
  for (const full of fulls) {
    // A HEAD, not the whole full, when an earlier run read this version of it.
    const version = verdicts && (await verdicts.version(store, full.name));
    const known = verdicts?.get(full.name, version);
    if (known?.ok) return { name: full.name, warnings };
    if (known) {
      warnings.push(`${full.name} does not verify, so it cannot start the newest chain: ${known.reason}`);
      continue;
    }
    try {
      await readThroughVersions(
        full,
        (read) => fetchFullSnapshot(store, read, '/dev/null', { signal, logger }),
        isUnusableFullSnapshot,
        (r) =>
          warnings.push(
            `${r.name} was hidden or replaced since it was stored; read from its version ${r.versionId}: ${r.why}`,
          ),
      );
      verdicts?.set(full.name, version, { ok: true });
      return { name: full.name, warnings };
    } catch (err) {
      // A restore given the same key file could not open this full either: it starts no chain.
      if (err instanceof UnknownKeyIdError) {
        warnings.push(`${full.name} cannot start the newest chain with this key file: ${errorMessage(err)}`);
        continue;
      }
      if (err instanceof EncryptionKeyError) {
        warnings.push(
          `${full.name} is kept unverified: ${errorMessage(err)}. Without it, gc cannot tell whether it is damaged and keeps it as the start of the newest restorable chain; with it, gc would pass over a damaged one`,
        );
        return { name: full.name, warnings };
      }
      if (!isUnusableFullSnapshot(err)) throw err;
      if (!(err instanceof ObjectNotFoundError))
        verdicts?.set(full.name, version, { ok: false, reason: errorMessage(err) });
      warnings.push(`${full.name} does not verify, so it cannot start the newest chain: ${errorMessage(err)}`);
    }
  }
  if (fulls.length > 0) {
    for (const warning of warnings) logger.warn(warning);
    throw new OperationError(
      `${store.location}: none of its ${fulls.length} full snapshots verifies, so no restore is possible from it; gc deletes nothing: take a full snapshot (etcd-snapshot save) first`,
    );
  }
  return { warnings };
}

/** Whether every delete the run tried went through (immutable objects count as expected, not as failures). */
export function pruneComplete(report: PruneReport): boolean {
  return (
    [...report.outcomes.values()].every((o) => o.result !== 'failed') &&
    report.plan.decisions
      .filter((d) => d.action === 'delete')
      .every((d) => report.dryRun || report.outcomes.has(d.name))
  );
}
