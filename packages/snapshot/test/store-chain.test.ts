import { snapshotName } from '@etcd-steward/core';
import { reconcileSpool, type SpooledDelta } from '@etcd-steward/snapshot';
import { describe, expect, it } from 'vitest';

let nextId = 1;
const spooled = (kind: 'Full' | 'Incr', startRevision: number, lastRevision: number): SpooledDelta => ({
  id: nextId++,
  name: snapshotName({ kind, startRevision, lastRevision, createdAt: 1795313340, compression: '.zst', final: false }),
  startRevision,
  lastRevision,
  bytes: 1,
  sha256: '',
  decompressedBytes: null,
  oldestEventAt: 0,
  etcdVersion: kind === 'Full' ? '3.4.23' : null,
});

const names = (plan: ReturnType<typeof reconcileSpool>) =>
  plan.drop.map(({ delta, chainRevision }) => [delta.name, chainRevision]);

describe('reconcileSpool', () => {
  it("resumes at the store's head when nothing is spooled", () => {
    expect(reconcileSpool(100, [])).toEqual({ head: 100, drop: [] });
  });

  it('keeps the deltas that continue the store, after dropping those it already holds', () => {
    const uploaded = spooled('Incr', 91, 100);
    const next = [spooled('Incr', 101, 110), spooled('Incr', 111, 120)];
    const plan = reconcileSpool(100, [uploaded, ...next]);
    expect(plan.head).toBe(120);
    expect(names(plan)).toEqual([[uploaded.name, undefined]]);
  });

  it('drops a delta past a gap, and every one after it, naming where the chain stops', () => {
    const kept = spooled('Incr', 101, 110);
    const gap = spooled('Incr', 121, 130);
    const after = spooled('Incr', 131, 140);
    const plan = reconcileSpool(100, [kept, gap, after]);
    expect(plan.head).toBe(110);
    expect(names(plan)).toEqual([
      [gap.name, 110],
      [after.name, 110],
    ]);
  });

  it("starts from a spooled full snapshot newer than the store's chain, with the deltas that continue it", () => {
    const full = spooled('Full', 0, 300);
    const delta = spooled('Incr', 301, 310);
    const plan = reconcileSpool(100, [full, delta]);
    expect(plan).toEqual({ head: 310, drop: [] });
  });

  it('drops a spooled full snapshot and deltas that the store has overtaken meanwhile', () => {
    const full = spooled('Full', 0, 300);
    const covered = spooled('Incr', 301, 350);
    const beyond = spooled('Incr', 351, 360);
    const plan = reconcileSpool(355, [full, covered, beyond]);
    expect(plan.head).toBe(355);
    // The store's newer snapshot cuts through the last delta: its revisions come from etcd again.
    expect(names(plan)).toEqual([
      [full.name, undefined],
      [covered.name, undefined],
      [beyond.name, 355],
    ]);
  });
});
