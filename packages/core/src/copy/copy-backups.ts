import { setTimeout as sleep } from 'node:timers/promises';
import { type CatalogEntry, catalogStore, listSnapshots } from '../backup/snapshot-catalog.js';
import { type RecoveredObject, readThroughVersions } from '../backup/stored-versions.js';
import { IntegrityError, UsageError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { fetchAsDone } from '../common/prefetch.js';
import { openStore } from '../store/location.js';
import { ObjectNotFoundError, type SnapStore } from '../store/snapstore.js';
import { sourceCredentialsEnv } from '../store/source-credentials.js';
import { parseStoreUrl, redact, sameStore } from '../store/store-url.js';
import { type BackupFilters, checkFilters, inStoreOrder, selectBackups } from './backup-selection.js';
import { alreadyHeld, COPY_CHECKS, type CopyCheck, copyObject, objectMetadata } from './copy-object.js';
import { CopyProgress } from './copy-progress.js';

export interface CopyBackupsOptions extends BackupFilters {
  /** Store URLs. */
  from: string;
  to: string;
  /** Objects copied at once. */
  maxParallel: number;
  /** 'content': every object's content decompressed and checked, not only those without a recorded sha256. */
  check?: CopyCheck;
  /** Before copying, wait for a final full snapshot in the source (its etcd was stopped), as ebr's flag. */
  waitForFinalSnapshot?: { timeoutMs: number; pollMs?: number };
  /** Keys that encrypt what is written to `to` (its first) and decrypt `from`, unless `sourceEncryptionKeyFile`. */
  encryptionKeyFile?: string;
  /** Keys that decrypt `from`: with another file for `to`, a copy re-encrypts every snapshot. */
  sourceEncryptionKeyFile?: string;
  logger?: Logger;
  signal?: AbortSignal;
}

/** A snapshot that was not copied because it failed its check, and why. */
export interface DamagedObject {
  name: string;
  problem: string;
}

export interface CopySummary {
  from: string;
  to: string;
  /** Snapshots the filters selected. */
  selected: number;
  copied: number;
  /** Already at the destination with the same name and size (and sha256 where both record one). */
  skipped: number;
  /** Gone from the source while the copy ran (a retention run, say). */
  vanished: number;
  damaged: DamagedObject[];
  /** Stored bytes copied. */
  bytes: number;
  /**
   * How many objects went which way: copied by the kernel (two local stores) or by the store's server (two buckets of
   * one S3 endpoint), the bytes never passing through the program, or streamed through it.
   */
  ways: { kernel: number; server: number; streamed: number };
  durationMs: number;
  bytesPerSecond: number;
  /** With waitForFinalSnapshot: whether one appeared before the timeout. */
  finalSnapshot?: 'found' | 'timed out';
  /** Source snapshots hidden or replaced since they were stored, copied from the version named (stored-versions.ts). */
  recovered?: RecoveredObject[];
}

/**
 * The full snapshots first, newest first, then the deltas, newest first (`selected`'s order, kept within each
 * kind). A copy cut short then holds the newest full snapshots, each of which restores on its own; and the largest
 * objects start first, so the small ones fill the other slots beside them: started last, a full snapshot was
 * copied and hashed alone after every delta.
 */
function copyOrder(selected: readonly CatalogEntry[]): CatalogEntry[] {
  return [...selected.filter((e) => e.kind === 'Full'), ...selected.filter((e) => e.kind !== 'Full')];
}

/** ebr's interval between looks for a final snapshot. */
const FINAL_SNAPSHOT_POLL_MS = 15_000;

/** Refuses settings that cannot work (exit 2), before any store is opened. */
export function checkCopySettings(
  options: Pick<CopyBackupsOptions, 'from' | 'to' | 'maxParallel' | 'check'> & BackupFilters,
): void {
  checkFilters(options);
  if (!(Number.isSafeInteger(options.maxParallel) && options.maxParallel >= 1)) {
    throw new UsageError(`--max-parallel ${options.maxParallel}: give a whole number of objects, 1 or more`);
  }
  if (options.check !== undefined && !COPY_CHECKS.includes(options.check)) {
    throw new UsageError(`--check ${options.check}: give ${COPY_CHECKS.join(' or ')}`);
  }
  const from = parseStoreUrl(options.from, '--from');
  const to = parseStoreUrl(options.to, '--to');
  if (sameStore(from, to)) {
    const spelled = redact(from.url) === redact(to.url) ? redact(to.url) : `${redact(from.url)} and ${redact(to.url)}`;
    throw new UsageError(`--from and --to are the same store (${spelled}): give another destination`);
  }
}

/**
 * Copies the selected snapshots from one store to another, the full snapshots first, then the deltas, each newest
 * first (copyOrder), `maxParallel` at a time, each streamed and checked on the way (copy-object.ts). What the
 * destination already holds is skipped, so a copy that was interrupted continues where it stopped when run again; a
 * damaged source object is reported and not copied.
 */
export async function copyBackups(options: CopyBackupsOptions): Promise<CopySummary> {
  checkCopySettings(options);
  const logger = options.logger ?? silentLogger;
  const started = Date.now();
  const from = await openStore(options.from, {
    env: sourceCredentialsEnv(),
    encryptionKeyFile: options.sourceEncryptionKeyFile ?? options.encryptionKeyFile,
  });
  try {
    // The destination's folder is created by the first copied object; the source's must exist (openStore).
    const to = await openStore(options.to, { encryptionKeyFile: options.encryptionKeyFile, allowMissingFolder: true });
    try {
      const finalSnapshot = options.waitForFinalSnapshot
        ? await waitForFinalSnapshot(from, options.waitForFinalSnapshot, logger, options.signal)
        : undefined;
      // the source with its versions, as a restore reads it: what was hidden or replaced there is copied as stored
      const listed = await catalogStore(from, { versions: true });
      if (listed.versionsUnreadable) logger.warn(`${from.location}: ${listed.versionsUnreadable}`);
      const selected = selectBackups(listed.snapshots, options);
      const recovered: RecoveredObject[] = [];
      const held = new Map((await listSnapshots(to)).map((e) => [e.name, e]));
      const missing: CatalogEntry[] = [];
      for (const entry of selected) {
        const there = held.get(entry.name);
        const same =
          there?.size === entry.size && (await alreadyHeld(to, there, (await objectMetadata(from, entry)).sha256));
        if (!same) missing.push(entry);
      }
      const wanted = copyOrder(missing);
      logger.info('copying', {
        from: from.location,
        to: to.location,
        selected: selected.length,
        toCopy: wanted.length,
        bytes: wanted.reduce((n, e) => n + e.size, 0),
      });
      const progress = new CopyProgress(
        logger,
        'copy',
        wanted.length,
        wanted.reduce((n, e) => n + e.size, 0),
      );
      const damaged: DamagedObject[] = [];
      let copied = 0;
      let vanished = 0;
      const ways = { kernel: 0, server: 0, streamed: 0 };
      const outcomes = fetchAsDone(
        wanted,
        (entry, signal) =>
          readThroughVersions(
            entry,
            (version) =>
              copyObject(from, to, version, {
                signal,
                check: options.check ?? 'stored',
                onBytes: (n) => progress.addBytes(n),
              }),
            (err) => err instanceof IntegrityError,
            (r) => {
              recovered.push(r);
              logger.warn('copied a snapshot hidden or replaced since it was stored, from its older version', { ...r });
            },
          ),
        { concurrency: options.maxParallel, signal: options.signal },
      );
      for await (const outcome of outcomes) {
        progress.objectDone();
        if (outcome.error === undefined) {
          copied++;
          ways[outcome.value!.way]++;
        } else if (outcome.error instanceof IntegrityError) {
          damaged.push({ name: outcome.item.name, problem: outcome.error.message });
          logger.error('not copied: the source object is damaged', {
            object: outcome.item.name,
            problem: outcome.error.message,
          });
        } else if (outcome.error instanceof ObjectNotFoundError) {
          vanished++;
          logger.warn('not copied: the object left the source while the copy ran', { object: outcome.item.name });
        } else {
          throw outcome.error;
        }
      }
      progress.report();
      const durationMs = Date.now() - started;
      return {
        from: from.location,
        to: to.location,
        selected: selected.length,
        copied,
        skipped: selected.length - wanted.length,
        vanished,
        damaged: inStoreOrder(damaged, listed.snapshots),
        bytes: progress.bytes,
        ways,
        durationMs,
        bytesPerSecond: Math.round(progress.rate()),
        ...(finalSnapshot ? { finalSnapshot } : {}),
        ...(recovered.length > 0 ? { recovered: inStoreOrder(recovered, listed.snapshots) } : {}),
      };
    } finally {
      await to.close?.();
    }
  } finally {
    await from.close?.();
  }
}

/**
 * Waits until the source's newest full snapshot is a final one (taken as its etcd stopped), looking every 15 s as
 * ebr does; a timeout of 0 waits as long as it takes. After a timeout the copy goes ahead with what is there.
 */
async function waitForFinalSnapshot(
  store: SnapStore,
  wait: { timeoutMs: number; pollMs?: number },
  logger: Logger,
  signal?: AbortSignal,
): Promise<'found' | 'timed out'> {
  const deadline = wait.timeoutMs > 0 ? Date.now() + wait.timeoutMs : Number.POSITIVE_INFINITY;
  logger.info('waiting for a final full snapshot in the source', { store: store.location });
  for (;;) {
    const fulls = (await listSnapshots(store)).filter((e) => e.kind === 'Full');
    if (fulls[fulls.length - 1]?.final) return 'found';
    const left = deadline - Date.now();
    if (left <= 0) {
      logger.warn('no final full snapshot before the timeout: copying what there is');
      return 'timed out';
    }
    await sleep(Math.min(wait.pollMs ?? FINAL_SNAPSHOT_POLL_MS, left), undefined, { signal });
  }
}
