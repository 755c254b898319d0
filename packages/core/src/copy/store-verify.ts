import { pipeline } from 'node:stream';
import { type CatalogEntry, catalogStore } from '../backup/snapshot-catalog.js';
import { planChains } from '../backup/snapshot-chain.js';
import { type RecoveredObject, readThroughVersions, versionOf } from '../backup/stored-versions.js';
import { errorMessage, IntegrityError, UsageError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { fetchAsDone } from '../common/prefetch.js';
import { wasDecrypted } from '../store/encrypted-store.js';
import { openStore } from '../store/location.js';
import type { SnapStore, StoreProtection } from '../store/snapstore.js';
import { inStoreOrder } from './backup-selection.js';
import type { DamagedObject } from './copy-backups.js';
import { objectMetadata } from './copy-object.js';
import { CopyProgress } from './copy-progress.js';
import { type FallbackGap, fallbackGaps } from './delta-coverage.js';
import { type CheckedObject, checkObject } from './object-check.js';

/** verify's exit codes besides 1 (the check itself failed) and 2 (bad usage). */
export const VERIFY_EXIT_CODES = {
  /** The store's newest revision restores: a chain of sound objects reaches it. */
  restorable: 0,
  /** It does not: the newest chain has a damaged or missing object (what is restorable, and to where, is reported). */
  notRestorable: 3,
  /**
   * It does, but snapshots were hidden (a delete marker) or replaced (a newer version that does not verify) since
   * they were stored, and are read from their older versions: what an attack or a mistake looks like
   * (docs/operator.md, "The backups were tampered with").
   */
  tampered: 7,
} as const;

export interface VerifyOptions {
  store: string;
  maxParallel: number;
  /** Keys that decrypt encrypted snapshots (docs/encryption.md). */
  encryptionKeyFile?: string;
  logger?: Logger;
  signal?: AbortSignal;
}

export interface StoreVerifyReport {
  store: string;
  objects: number;
  /** Stored bytes read. */
  bytes: number;
  damaged: DamagedObject[];
  /** The newest revision any snapshot's name reaches, damaged ones included. */
  newestRevision: number;
  /** The chain of sound objects that restores furthest, and the revision it restores. */
  restorable?: { full: string; deltas: string[]; revision: number };
  /** Revisions after `restorable` that no sound delta holds (a delta missing or damaged). */
  missing?: { from: number; to: number };
  /** Sound full snapshots from which no chain of sound deltas reaches the newest revision, and what it misses. */
  fallbackGaps: FallbackGap[];
  /** Snapshots hidden or replaced since they were stored, each read from the version named. */
  recovered: RecoveredObject[];
  /** How the provider protects the store, where it says (S3: versioning, Object Lock). */
  protection?: StoreProtection;
  exitCode: number;
}

/**
 * Reads and checks every snapshot of a store as a copy would (object-check.ts), then the continuity of its chains
 * built from the sound ones: which revision a restore reaches, and whether that is the newest the store names.
 */
export async function verifyStore(options: VerifyOptions): Promise<StoreVerifyReport> {
  if (!(Number.isSafeInteger(options.maxParallel) && options.maxParallel >= 1)) {
    throw new UsageError(`--max-parallel ${options.maxParallel}: give a whole number of objects, 1 or more`);
  }
  const logger = options.logger ?? silentLogger;
  const store = await openStore(options.store, { encryptionKeyFile: options.encryptionKeyFile });
  try {
    const catalog = await catalogStore(store, { versions: true });
    if (catalog.versionsUnreadable) logger.warn(`${store.location}: ${catalog.versionsUnreadable}`);
    const entries = catalog.snapshots;
    // where the provider says (S3, GCS); the others have no versions to read through either
    const protection = await store.protection?.().catch((err: unknown) => {
      logger.warn('cannot read how the store is protected', { reason: errorMessage(err) });
      return undefined;
    });
    const recovered: RecoveredObject[] = [];
    const progress = new CopyProgress(
      logger,
      'verify',
      entries.length,
      entries.reduce((n, e) => n + e.size, 0),
    );
    const damagedAsDone: DamagedObject[] = [];
    const soundAsDone: CatalogEntry[] = [];
    const read = (entry: CatalogEntry) =>
      readThroughVersions(
        entry,
        (version) => readAndCheck(store, version, progress),
        (err) => err instanceof IntegrityError,
        (r) => {
          recovered.push(r);
          logger.warn('a snapshot was hidden or replaced since it was stored; read from its older version', { ...r });
        },
      );
    const outcomes = fetchAsDone(entries, read, {
      concurrency: options.maxParallel,
      signal: options.signal,
    });
    for await (const outcome of outcomes) {
      progress.objectDone();
      if (outcome.error === undefined) soundAsDone.push(outcome.item);
      else if (outcome.error instanceof IntegrityError) {
        damagedAsDone.push({ name: outcome.item.name, problem: outcome.error.message });
        logger.error('damaged', { object: outcome.item.name, problem: outcome.error.message });
      } else throw outcome.error;
    }
    progress.report();
    const [sound, damaged] = [inStoreOrder(soundAsDone, entries), inStoreOrder(damagedAsDone, entries)];
    const newestRevision = entries.reduce((max, e) => Math.max(max, e.lastRevision), 0);
    const best = planChains(sound).reduce<ReturnType<typeof planChains>[number] | undefined>(
      (a, c) => (!a || c.lastRevision > a.lastRevision ? c : a),
      undefined,
    );
    const reached = best?.lastRevision ?? 0;
    const restores = best !== undefined && reached >= newestRevision;
    // The gap ends where the next sound delta begins: for one lost delta, exactly its revisions.
    const resumes = sound
      .filter((e) => e.kind === 'Incr' && e.startRevision > reached + 1)
      .reduce((min, e) => Math.min(min, e.startRevision), newestRevision + 1);
    return {
      store: store.location,
      objects: entries.length,
      bytes: progress.bytes,
      damaged,
      newestRevision,
      ...(best
        ? { restorable: { full: best.full.name, deltas: best.deltas.map((d) => d.name), revision: reached } }
        : {}),
      ...(best && !restores ? { missing: { from: reached + 1, to: resumes - 1 } } : {}),
      fallbackGaps: fallbackGaps(sound, newestRevision),
      recovered: inStoreOrder(recovered, entries),
      ...(protection ? { protection } : {}),
      exitCode: !restores
        ? VERIFY_EXIT_CODES.notRestorable
        : recovered.length > 0
          ? VERIFY_EXIT_CODES.tampered
          : VERIFY_EXIT_CODES.restorable,
    };
  } finally {
    await store.close?.();
  }
}

async function readAndCheck(store: SnapStore, entry: CatalogEntry, progress: CopyProgress): Promise<CheckedObject> {
  const metadata = await objectMetadata(store, entry);
  const source = await store.get(entry.name, versionOf(entry));
  const check = checkObject(entry, metadata, `${store.location}/${entry.name}`, {
    revision: true,
    decrypted: () => wasDecrypted(source),
  });
  source.on('data', (chunk: Buffer) => progress.addBytes(chunk.length));
  pipeline(source, check.input, (err) => {
    if (err) check.input.destroy(err);
  });
  return check.result;
}
