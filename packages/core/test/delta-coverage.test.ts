import { type CatalogEntry, fallbackGaps, parseSnapshotName, snapshotName } from '@etcd-steward/core';
import { expect, it } from 'vitest';

const entry = (kind: 'Full' | 'Incr', startRevision: number, lastRevision: number): CatalogEntry => ({
  ...parseSnapshotName(
    snapshotName({ kind, startRevision, lastRevision, createdAt: 1795313340, compression: '.zst', final: false }),
  )!,
  size: 1,
  metadata: {},
});

it('lists no full snapshot whose deltas go on through every later one', () => {
  // Two full snapshots within one delta period: the delta from 41 goes on through both.
  const store = [entry('Full', 0, 40), entry('Incr', 41, 80), entry('Full', 0, 60), entry('Full', 0, 70)];
  expect(fallbackGaps(store, 80)).toEqual([]);
});

it('names, for each full snapshot, the revisions after it that no delta holds', () => {
  // The chain started again after the full snapshot at 100 (etcd had compacted what the next delta needed).
  const store = [entry('Full', 0, 40), entry('Incr', 41, 60), entry('Full', 0, 100), entry('Incr', 101, 130)];
  expect(fallbackGaps(store, 130)).toEqual([{ full: store[0].name, revision: 40, inNoDelta: [{ from: 61, to: 100 }] }]);
  // A store whose newest full snapshot is past every delta.
  expect(fallbackGaps([entry('Full', 0, 40), entry('Incr', 41, 60), entry('Full', 0, 90)], 90)).toEqual([
    { full: store[0].name, revision: 40, inNoDelta: [{ from: 61, to: 90 }] },
  ]);
});
