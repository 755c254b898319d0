import { describe, expect, it } from 'vitest';
import { compareSnapshots, parseSnapshotName, snapshotName } from '../src/format/snapshot-name.js';

describe('snapshot names (ebr format)', () => {
  it('writes the names ebr writes, padded to 8 digits and no narrower', () => {
    const ref = {
      kind: 'Full',
      startRevision: 0,
      lastRevision: 7,
      createdAt: 1795299379,
      compression: '',
      final: false,
    } as const;
    expect(snapshotName(ref)).toBe('v2/Full-00000000-00000007-1795299379');
    expect(snapshotName({ ...ref, kind: 'Incr', startRevision: 8, lastRevision: 123456789, compression: '.gz' })).toBe(
      'v2/Incr-00000008-123456789-1795299379.gz',
    );
    expect(snapshotName({ ...ref, compression: '.zst', final: true })).toBe(
      'v2/Full-00000000-00000007-1795299379.zst.final',
    );
  });

  it('reads v2 and legacy v1 names and ignores anything else', () => {
    expect(parseSnapshotName('v2/Incr-00000004-00000007-1795299359.gz')).toMatchObject({
      kind: 'Incr',
      startRevision: 4,
      lastRevision: 7,
      createdAt: 1795299359,
      compression: '.gz',
      final: false,
    });
    expect(parseSnapshotName('v1/Backup-1600000000/Full-00000000-00000010-1600000000.Z')).toMatchObject({
      kind: 'Full',
      lastRevision: 10,
      compression: '.Z',
    });
    for (const junk of [
      'v2/notes.txt',
      'Full-00000000-00000007-1795299379',
      'v2/Full-0-7-1',
      'v3/Full-00000000-00000007-1',
      'v2/Incr-00000009-00000008-1',
    ]) {
      expect(parseSnapshotName(junk)).toBeUndefined();
    }
  });

  it('orders a full before a delta that ends at the same revision', () => {
    const full = parseSnapshotName('v2/Full-00000000-00000007-1795299379')!;
    const incr = parseSnapshotName('v2/Incr-00000004-00000007-1795299359.gz')!;
    expect([incr, full].sort(compareSnapshots)).toEqual([full, incr]);
  });
});
