import { addRange, formatReadBack, parseReadBack, type RevisionRanges, rangeHolding } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';

describe("a delta's read-back revisions as object metadata", () => {
  it('writes `none` or ranges, and reads back what it wrote', () => {
    expect(formatReadBack([])).toBe('none');
    expect(parseReadBack('none')).toEqual([]);
    const ranges: RevisionRanges = [];
    addRange(ranges, 10, 12);
    addRange(ranges, 13, 15); // touches the last: one range
    addRange(ranges, 20, 20);
    expect(formatReadBack(ranges)).toBe('10-15,20');
    expect(parseReadBack('10-15,20')).toEqual([
      [10, 15],
      [20, 20],
    ]);
  });

  it('joins the closest ranges past 1024 characters, so no read-back revision is ever taken for live', () => {
    const ranges: RevisionRanges = [];
    for (let r = 1_000_000; r < 1_000_000 + 400 * 3; r += 3) addRange(ranges, r, r);
    const value = formatReadBack(ranges);
    expect(value.length).toBeLessThanOrEqual(1024);
    const read = parseReadBack(value)!;
    for (const [r] of ranges) expect(rangeHolding(read, r)).toBeDefined();
  });

  it('takes a value it does not know (another tool, a damaged store) as saying nothing', () => {
    for (const value of [undefined, '', 'all', '5-3', '7,7', '3-5,4-9', '-1', '1.5']) {
      expect(parseReadBack(value)).toBeUndefined();
    }
  });
});
