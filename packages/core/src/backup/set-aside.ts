import { setTimeout as sleep } from 'node:timers/promises';
import { OperationError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { SnapStore } from '../store/snapstore.js';
import { ImmutableObjectError } from '../store/snapstore.js';
import { storeDeltaPrefix } from './delta-prefix.js';
import { FORKS_FOLDER, listSnapshots } from './snapshot-catalog.js';
import { MAINTENANCE_LOCK, StoreLockedError, withStoreLock } from './store-lock.js';

/** The folder of one fork: the revision both histories share and when it was set aside. */
export function forkFolder(commonRevision: number, now = new Date()): string {
  return `${FORKS_FOLDER}/${commonRevision}-${Math.floor(now.getTime() / 1000)}`;
}

/** How long the set-aside holds the maintenance lock without renewing it. */
const LOCK_TTL_MS = 60_000;
/** How long a set-aside waits for a compaction or gc that holds the lock, and how often it asks again. */
export const SET_ASIDE_LOCK_WAIT_MS = 30 * 60_000;
const LOCK_RETRY_MS = 5_000;

/**
 * Moves the store's snapshots past `afterRevision` out of the chain into `folder`, the newest first, so that what
 * the chain still shows is a history without holes at every moment. It holds the store's maintenance lock (as
 * compaction and gc do) and lists under it: a compaction cannot store a full snapshot of the history being set aside
 * meanwhile, and one stored just before is listed and moved with it. Each object is copied as it is stored
 * (encrypted or not, with its metadata), checked by its size, and only then deleted from `v2/`; a crash in between
 * leaves it in both places, and its copy leaves it out of the chain (snapshot-catalog.ts), as it does one the provider
 * retains. A delta that straddles `afterRevision` leaves its revisions
 * through it behind, as a delta of their own (delta-prefix.ts), stored before it moves: they are the history going
 * on too. Returns each snapshot moved, by its old and new name.
 */
export async function setAside(
  store: SnapStore,
  afterRevision: number,
  folder: string,
  options: { signal?: AbortSignal; logger?: Logger; lockSettleMs?: number; lockWaitMs?: number } = {},
): Promise<Array<{ from: string; to: string }>> {
  const deadline = Date.now() + (options.lockWaitMs ?? SET_ASIDE_LOCK_WAIT_MS);
  for (let said = false; ; said = true) {
    try {
      return await moveUnderLock(store, afterRevision, folder, options);
    } catch (err) {
      if (!(err instanceof StoreLockedError) || Date.now() + LOCK_RETRY_MS > deadline) throw err;
      if (!said)
        options.logger?.info('waiting for the store lock to set the abandoned history aside', { reason: err.message });
      await sleep(LOCK_RETRY_MS, undefined, { signal: options.signal });
    }
  }
}

function moveUnderLock(
  store: SnapStore,
  afterRevision: number,
  folder: string,
  options: { signal?: AbortSignal; logger?: Logger; lockSettleMs?: number },
): Promise<Array<{ from: string; to: string }>> {
  return withStoreLock(
    store,
    MAINTENANCE_LOCK,
    async (signal) => {
      const later = (await listSnapshots(store)).filter((e) => e.lastRevision > afterRevision);
      const moved: Array<{ from: string; to: string }> = [];
      for (const entry of later.sort((a, b) => b.lastRevision - a.lastRevision)) {
        signal.throwIfAborted();
        const target = `${folder}/${entry.name.split('/').pop()}`;
        const source = await store.stat(entry.name);
        if (!source) continue; // moved by another run meanwhile
        if (entry.kind === 'Incr' && entry.startRevision <= afterRevision) {
          const kept = await storeDeltaPrefix(store, entry, afterRevision, { signal });
          options.logger?.info('kept the revisions a set-aside delta shares with the history going on', {
            delta: entry.name,
            kept,
          });
        }
        await store.put(target, await store.get(entry.name, { raw: true }), { metadata: source.metadata, signal });
        const copy = await store.stat(target);
        if (copy?.size !== source.size) {
          throw new OperationError(
            `${store.location}: the copy of ${entry.name} in ${folder} has ${copy?.size ?? 'no'} bytes, not ${source.size}; the snapshot stays where it is`,
          );
        }
        try {
          await store.delete(entry.name);
        } catch (err) {
          if (!(err instanceof ImmutableObjectError)) throw err;
          // Its copy under forks/ leaves it out of every listing of the chain (snapshot-catalog.ts) all the same.
          options.logger?.warn(
            "the store's Object Lock or retention policy retains a set-aside snapshot in v2/: its copy under forks/ marks it abandoned, and these programs leave it out (ebr would still read it)",
            { snapshot: entry.name, copy: target, reason: err.message },
          );
        }
        moved.push({ from: entry.name, to: target });
      }
      return moved;
    },
    {
      ttlMs: LOCK_TTL_MS,
      settleMs: options.lockSettleMs,
      purpose: 'setting aside an abandoned history (forks/)',
      signal: options.signal,
      logger: options.logger,
    },
  );
}
