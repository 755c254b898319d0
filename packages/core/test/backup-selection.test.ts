import { describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../src/backup/snapshot-catalog.js';
import { checkFilters, selectBackups } from '../src/copy/backup-selection.js';
import { parseSnapshotName } from '../src/format/snapshot-name.js';

function entry(name: string): CatalogEntry {
  return { ...parseSnapshotName(`v2/${name}`)!, size: 1, metadata: {} };
}

const DAY = 86_400;
const now = new Date(100 * DAY * 1000);
// Two backups as ebr makes them: a full, deltas, a delta that ends where the next full begins, that full, deltas.
const store = [
  entry(`Incr-00000001-00000004-${10 * DAY}`), // older than any full: belongs to no backup
  entry(`Full-00000000-00000010-${20 * DAY}`),
  entry(`Incr-00000011-00000020-${20 * DAY + 60}`),
  entry(`Incr-00000021-00000030-${95 * DAY}`),
  entry(`Full-00000000-00000030-${95 * DAY}`),
  entry(`Incr-00000031-00000040-${99 * DAY}`),
];
const names = (entries: CatalogEntry[]) => entries.map((e) => e.name.slice(3, 30));

describe('selectBackups', () => {
  it('selects every snapshot without filters, newest first', () => {
    expect(names(selectBackups(store, {}, now))).toEqual([
      'Incr-00000031-00000040-8553',
      'Incr-00000021-00000030-8208',
      'Full-00000000-00000030-8208',
      'Incr-00000011-00000020-1728',
      'Full-00000000-00000010-1728',
      'Incr-00000001-00000004-8640',
    ]);
  });

  it('counts backups as ebr does: a full and its deltas, the delta ending at the next full in the one before', () => {
    expect(names(selectBackups(store, { maxBackups: 1 }, now))).toEqual([
      'Incr-00000031-00000040-8553',
      'Full-00000000-00000030-8208',
    ]);
    expect(selectBackups(store, { maxBackups: 2 }, now)).toHaveLength(5);
    expect(selectBackups(store, { maxBackups: 0 }, now)).toEqual([]);
  });

  it('keeps backups whose full is at most --max-backup-age days old, and snapshots reaching --since-revision', () => {
    expect(names(selectBackups(store, { maxBackupAgeDays: 10 }, now))).toEqual([
      'Incr-00000031-00000040-8553',
      'Full-00000000-00000030-8208',
    ]);
    expect(selectBackups(store, { maxBackupAgeDays: 3 }, now)).toEqual([]);
    expect(names(selectBackups(store, { sinceRevision: 30 }, now))).toEqual([
      'Incr-00000031-00000040-8553',
      'Incr-00000021-00000030-8208',
      'Full-00000000-00000030-8208',
    ]);
  });

  it('selects the newest restorable chain, and combines filters', () => {
    expect(names(selectBackups(store, { newestChainOnly: true }, now))).toEqual([
      'Incr-00000031-00000040-8553',
      'Full-00000000-00000030-8208',
    ]);
    expect(names(selectBackups(store, { newestChainOnly: true, sinceRevision: 31 }, now))).toEqual([
      'Incr-00000031-00000040-8553',
    ]);
  });

  it('refuses counts, ages and revisions that are not whole numbers of 0 or more', () => {
    expect(() => checkFilters({ maxBackups: -2 })).toThrow('--max-backups-to-copy -2: give a whole number');
    expect(() => checkFilters({ maxBackupAgeDays: 1.5 })).toThrow('--max-backup-age 1.5');
    expect(() => checkFilters({ sinceRevision: Number.NaN })).toThrow('--since-revision NaN');
  });
});
