import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import { planChains } from '../backup/snapshot-chain.js';
import { UsageError } from '../common/errors.js';
import { compareSnapshots } from '../format/snapshot-name.js';

/** Which snapshots to carry; with none of these set, every snapshot in the store. */
export interface BackupFilters {
  /** The newest N backups (a backup: a full snapshot and the deltas after it, up to the next full), as ebr counts. */
  maxBackups?: number;
  /** Backups whose full snapshot is at most this many days old, as ebr's --max-backup-age. */
  maxBackupAgeDays?: number;
  /** Snapshots that reach this revision or beyond (their last revision is at least this). */
  sinceRevision?: number;
  /** The newest restorable chain only: the newest full snapshot and the deltas that carry it forward. */
  newestChainOnly?: boolean;
}

/** Whether any filter is set. */
export function filtering(filters: BackupFilters): boolean {
  return (
    filters.maxBackups !== undefined ||
    filters.maxBackupAgeDays !== undefined ||
    filters.sinceRevision !== undefined ||
    filters.newestChainOnly === true
  );
}

/** Refuses filter values that mean nothing (exit 2, before any work). */
export function checkFilters(filters: BackupFilters): void {
  const whole = (flag: string, value: number | undefined) => {
    if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0)) {
      throw new UsageError(`--${flag} ${value}: give a whole number, 0 or more`);
    }
  };
  whole('max-backups-to-copy', filters.maxBackups);
  whole('max-backup-age', filters.maxBackupAgeDays);
  whole('since-revision', filters.sinceRevision);
}

/**
 * The snapshots the filters select from a store's catalog, newest first (the order a copy takes: the newest
 * backups are the most valuable if it is cut short). The filters combine: each narrows the selection.
 */
export function selectBackups(
  entries: readonly CatalogEntry[],
  filters: BackupFilters,
  now = new Date(),
): CatalogEntry[] {
  let selected: CatalogEntry[] = [...entries];
  if (filters.newestChainOnly) {
    const [chain] = planChains(entries);
    selected = chain ? [chain.full, ...chain.deltas] : [];
  }
  if (filters.maxBackups !== undefined || filters.maxBackupAgeDays !== undefined) {
    const cutoff =
      filters.maxBackupAgeDays === undefined ? undefined : now.getTime() / 1000 - filters.maxBackupAgeDays * 86_400;
    const kept = backupsOf(selected)
      .filter((b) => cutoff === undefined || b[0].createdAt >= cutoff)
      .slice(0, filters.maxBackups);
    selected = kept.flat();
  }
  if (filters.sinceRevision !== undefined) {
    const since = filters.sinceRevision;
    selected = selected.filter((e) => e.lastRevision >= since);
  }
  return selected.sort((a, b) => compareSnapshots(b, a));
}

/**
 * The catalog as ebr groups it into backups: each full snapshot with the deltas that follow it up to the next
 * full, newest backup first. Deltas older than every full belong to no backup.
 */
function backupsOf(entries: readonly CatalogEntry[]): CatalogEntry[][] {
  const backups: CatalogEntry[][] = [];
  for (const entry of [...entries].sort(compareSnapshots)) {
    if (entry.kind === 'Full') {
      backups.push([entry]);
      continue;
    }
    // A delta ending where a full snapshot ends (ebr uploads one before each full) belongs to the backup before.
    const current = backups[backups.length - 1];
    const owner = current && current[0].lastRevision >= entry.lastRevision ? backups[backups.length - 2] : current;
    owner?.push(entry);
  }
  return backups.reverse();
}

/** `items` (one per snapshot, by name) in the store's order, oldest first, whatever order their work ended in. */
export function inStoreOrder<T extends { name: string }>(items: readonly T[], store: readonly CatalogEntry[]): T[] {
  const byName = new Map(items.map((item) => [item.name, item]));
  return store.flatMap((e) => byName.get(e.name) ?? []);
}
