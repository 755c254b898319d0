// Waiting on a sidecar's store: how far its snapshots reach, and a poll until a condition holds. run.ts,
// size-dataset.ts and sidecar-ebr.ts use them.
import { setTimeout as sleep } from 'node:timers/promises';
import { LocalStore, listSnapshots } from '@etcd-steward/core';

/** The newest revision a local store's snapshots reach (0 for none). */
export const storeReaches = async (dir: string): Promise<number> =>
  Math.max(0, ...(await listSnapshots(new LocalStore(dir)).catch(() => [])).map((e) => e.lastRevision));

/** Polls until `probe` holds; fails after `ms`. */
export async function until(what: string, probe: () => Promise<boolean>, ms = 300_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}
