import { parseSnapshotName, snapshotName } from '@etcd-steward/core';
import { headsOf, reconcileSpool, resumeRevision, type SpooledDelta, spoolFit } from '@etcd-steward/snapshot';
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
  line: null,
  revisionDigest: null,
});

const names = (plan: ReturnType<typeof reconcileSpool>) =>
  plan.drop.map(({ delta, chainRevision }) => [delta.name, chainRevision]);

describe('reconcileSpool', () => {
  it("resumes at the store's head when nothing is spooled", () => {
    expect(reconcileSpool({ head: 100, deltaHead: 100, fullsAfter: [] }, [])).toEqual({
      heads: { head: 100, deltaHead: 100, fullsAfter: [] },
      drop: [],
    });
  });

  it('keeps the deltas that continue the store, after dropping those it already holds', () => {
    const uploaded = spooled('Incr', 91, 100);
    const next = [spooled('Incr', 101, 110), spooled('Incr', 111, 120)];
    const plan = reconcileSpool({ head: 100, deltaHead: 100, fullsAfter: [] }, [uploaded, ...next]);
    expect(plan.heads).toEqual({ head: 120, deltaHead: 120, fullsAfter: [] });
    expect(names(plan)).toEqual([[uploaded.name, undefined]]);
  });

  it('drops a delta past a gap, and every one after it, naming where the chain stops', () => {
    const kept = spooled('Incr', 101, 110);
    const gap = spooled('Incr', 121, 130);
    const after = spooled('Incr', 131, 140);
    const plan = reconcileSpool({ head: 100, deltaHead: 100, fullsAfter: [] }, [kept, gap, after]);
    expect(plan.heads.head).toBe(110);
    expect(names(plan)).toEqual([
      [gap.name, 110],
      [after.name, 110],
    ]);
  });

  it("starts from a spooled full snapshot newer than the store's chain, with the deltas that continue it", () => {
    const full = spooled('Full', 0, 300);
    const delta = spooled('Incr', 301, 310);
    const plan = reconcileSpool({ head: 100, deltaHead: 100, fullsAfter: [] }, [full, delta]);
    expect(plan).toEqual({ heads: { head: 310, deltaHead: 310, fullsAfter: [] }, drop: [] });
  });

  it('drops a spooled full snapshot and deltas that the store has overtaken meanwhile', () => {
    const full = spooled('Full', 0, 300);
    const covered = spooled('Incr', 301, 350);
    const beyond = spooled('Incr', 351, 360);
    const plan = reconcileSpool({ head: 355, deltaHead: 355, fullsAfter: [] }, [full, covered, beyond]);
    expect(plan.heads.head).toBe(355);
    // The store's newer delta cuts through the last one: its revisions come from etcd again.
    expect(names(plan)).toEqual([
      [full.name, undefined],
      [covered.name, undefined],
      [beyond.name, 355],
    ]);
  });

  it('keeps the delta a newer full snapshot cuts through, and the one that continues the deltas below it', () => {
    // The store: deltas up to 100, then a full snapshot at 150 taken while the watch went on.
    const store = { head: 150, deltaHead: 100, fullsAfter: [150] };
    const below = spooled('Incr', 101, 140);
    const through = spooled('Incr', 141, 160);
    const plan = reconcileSpool(store, [below, through]);
    expect(plan).toEqual({ heads: { head: 160, deltaHead: 160, fullsAfter: [] }, drop: [] });
  });

  it('keeps the delta that goes on through two full snapshots taken within one delta period', async () => {
    // The store: deltas up to 80, then full snapshots at 100 and 130 while the open delta grew from 81 on.
    const ref = (kind: 'Full' | 'Incr', s: number, l: number) => parseSnapshotName(spooled(kind, s, l).name)!;
    const store = headsOf([ref('Full', 0, 40), ref('Incr', 41, 80), ref('Full', 0, 100), ref('Full', 0, 130)]);
    const through = spooled('Incr', 81, 140);
    expect(reconcileSpool(store, [through])).toEqual({
      heads: { head: 140, deltaHead: 140, fullsAfter: [] },
      drop: [],
    });
    expect(await resumeRevision(store, async () => true)).toBe(80);
  });

  it('resumes after the full snapshot a chain started again at, where etcd no longer holds the deltas end', async () => {
    const ref = (kind: 'Full' | 'Incr', s: number, l: number) => parseSnapshotName(spooled(kind, s, l).name)!;
    // Deltas up to 1526, etcd compacted past them, the chain started again at a full snapshot at 4039.
    const store = headsOf([ref('Full', 0, 532), ref('Incr', 533, 1526), ref('Full', 0, 4039), ref('Full', 0, 5000)]);
    expect(await resumeRevision(store, async (r) => r > 3000)).toBe(4039);
    expect(await resumeRevision(store, async () => false)).toBe(5000);
  });
});

describe('headsOf', () => {
  const ref = (kind: 'Full' | 'Incr', startRevision: number, lastRevision: number) =>
    parseSnapshotName(spooled(kind, startRevision, lastRevision).name)!;
  it('ends the deltas at the newest delta, and lists the full snapshots past it', () => {
    expect(headsOf([ref('Full', 0, 1), ref('Full', 0, 61)])).toEqual({ head: 61, deltaHead: 0, fullsAfter: [1, 61] });
    expect(headsOf([ref('Full', 0, 1), ref('Incr', 2, 50), ref('Full', 0, 60)])).toEqual({
      head: 60,
      deltaHead: 50,
      fullsAfter: [60],
    });
    expect(headsOf([ref('Full', 0, 60)])).toEqual({ head: 60, deltaHead: 0, fullsAfter: [60] });
    expect(headsOf([ref('Full', 0, 60), ref('Full', 0, 60), ref('Incr', 55, 70)])).toEqual({
      head: 70,
      deltaHead: 70,
      fullsAfter: [],
    });
  });
  it('lets the deltas after a fork continue the full snapshot below the one taken since', () => {
    expect(spoolFit(spooled('Incr', 2, 61), headsOf([ref('Full', 0, 1), ref('Full', 0, 61)]))).toBe('upload');
  });
});

describe('spoolFit', () => {
  const store = { head: 150, deltaHead: 100, fullsAfter: [150] };
  it('uploads a delta that goes on through a newer full snapshot, or up to it from the last delta', () => {
    expect(spoolFit(spooled('Incr', 101, 160), store)).toBe('upload');
    expect(spoolFit(spooled('Incr', 151, 160), store)).toBe('upload');
    expect(spoolFit(spooled('Incr', 101, 150), store)).toBe('upload');
  });
  it('drops what the store holds, and refuses a gap', () => {
    expect(spoolFit(spooled('Incr', 91, 100), store)).toBe('covered');
    expect(spoolFit(spooled('Incr', 121, 140), store)).toBe('covered');
    expect(spoolFit(spooled('Full', 0, 150), store)).toBe('covered');
    expect(spoolFit(spooled('Incr', 152, 160), store)).toBe('gap');
    expect(spoolFit(spooled('Incr', 91, 160), store)).toBe('gap');
    expect(spoolFit(spooled('Full', 0, 170), store)).toBe('upload');
  });
});
