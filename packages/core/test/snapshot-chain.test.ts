import { describe, expect, it } from 'vitest';
import { ebrStoreDir } from '../../../test/fixtures.js';
import type { CatalogEntry } from '../src/backup/snapshot-catalog.js';
import { listSnapshots } from '../src/backup/snapshot-catalog.js';
import { planChains } from '../src/backup/snapshot-chain.js';
import { parseSnapshotName } from '../src/format/snapshot-name.js';
import { LocalStore } from '../src/store/local.js';

const fixtureStore = new LocalStore(ebrStoreDir);

function entry(name: string): CatalogEntry {
  return { ...parseSnapshotName(`v2/${name}`)!, size: 1, metadata: {} };
}

const names = (chain: { full: CatalogEntry; deltas: CatalogEntry[] }) =>
  [chain.full, ...chain.deltas].map((e) => e.name.slice(3));

describe('planChains', () => {
  it("plans ebr's fixture store: the newest full and the deltas after it, then the older full's longer chain", async () => {
    const chains = planChains(await listSnapshots(fixtureStore));
    expect(chains.map(names)).toEqual([
      ['Full-00000000-00000007-1795299379', 'Incr-00000008-00000008-1795299383', 'Incr-00000009-00000009-1795299385'],
      [
        'Full-00000000-00000003-1795299353.gz',
        'Incr-00000004-00000007-1795299359.gz',
        'Incr-00000008-00000008-1795299383',
        'Incr-00000009-00000009-1795299385',
      ],
    ]);
    expect(chains.map((c) => c.lastRevision)).toEqual([9, 9]);
    expect(chains.every((c) => c.gap === undefined)).toBe(true);
  });

  it('reports a missing delta as a gap up to the newest revision the store names', () => {
    const chains = planChains([
      entry('Full-00000000-00000010-100'),
      entry('Incr-00000011-00000020-110'),
      entry('Incr-00000031-00000040-130'),
    ]);
    expect(chains).toHaveLength(1);
    expect(chains[0].lastRevision).toBe(20);
    expect(chains[0].gap).toEqual({ from: 21, to: 40 });
  });

  it('tolerates overlapping deltas (two leaders, a full holding more than its name) and takes the furthest', () => {
    const chains = planChains([
      entry('Full-00000000-00000010-100'),
      entry('Incr-00000011-00000020-110'),
      entry('Incr-00000011-00000025-111'),
      entry('Incr-00000021-00000030-120'),
      entry('Incr-00000026-00000035-121'),
    ]);
    expect(names(chains[0])).toEqual([
      'Full-00000000-00000010-100',
      'Incr-00000011-00000025-111',
      'Incr-00000026-00000035-121',
    ]);
    expect(chains[0].lastRevision).toBe(35);
  });

  it('stops at a target revision, choosing only fulls at or below it', () => {
    const entries = [
      entry('Full-00000000-00000010-100'),
      entry('Incr-00000011-00000020-110'),
      entry('Full-00000000-00000020-111'),
      entry('Incr-00000021-00000030-120'),
      entry('Incr-00000031-00000040-130'),
    ];
    const [first, second] = planChains(entries, { revision: 25 });
    expect(names(first)).toEqual(['Full-00000000-00000020-111', 'Incr-00000021-00000030-120']);
    expect(first.lastRevision).toBe(25);
    expect(first.gap).toBeUndefined();
    expect(names(second)).toEqual([
      'Full-00000000-00000010-100',
      'Incr-00000011-00000020-110',
      'Incr-00000021-00000030-120',
    ]);
    expect(planChains(entries, { revision: 20 })[0].deltas).toEqual([]);
    expect(planChains(entries, { revision: 9 })).toEqual([]);
  });

  it('stops at a target time after the first delta created past it', () => {
    const entries = [
      entry('Full-00000000-00000010-100'),
      entry('Incr-00000011-00000020-110'),
      entry('Incr-00000021-00000030-120'),
      entry('Incr-00000031-00000040-130'),
      entry('Full-00000000-00000040-131'),
    ];
    const [chain, ...rest] = planChains(entries, { time: new Date(115_000) });
    expect(rest).toEqual([]);
    expect(names(chain)).toEqual([
      'Full-00000000-00000010-100',
      'Incr-00000011-00000020-110',
      'Incr-00000021-00000030-120',
    ]);
    expect(chain.gap).toBeUndefined();
  });
});
