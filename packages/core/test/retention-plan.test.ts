import { describe, expect, it } from 'vitest';
import type { CatalogEntry, ChunkEntry } from '../src/backup/snapshot-catalog.js';
import { parseChunkName, parseSnapshotName, snapshotName } from '../src/format/snapshot-name.js';
import { Calendar } from '../src/retention/calendar.js';
import { NEWEST_CHAIN, planRetention, type RetentionPolicy } from '../src/retention/retention-plan.js';

const at = (iso: string) => Math.floor(Date.parse(iso) / 1000);

/** A store from lines of "Full|Incr start last ISO-time [size]"; revisions are made up, times too. */
function store(...lines: string[]): CatalogEntry[] {
  return lines.map((line) => {
    const [kind, start, last, time, size] = line.split(' ');
    const ref = {
      kind: kind as 'Full' | 'Incr',
      startRevision: Number(start),
      lastRevision: Number(last),
      createdAt: at(time),
      compression: '.gz' as const,
      final: false,
    };
    return { ...ref, name: snapshotName(ref), size: Number(size ?? 100), metadata: {} };
  });
}

/** Fulls at these times, revisions increasing with them. */
const fullsAt = (...times: string[]) => store(...times.map((t, i) => `Full 0 ${(i + 1) * 10} ${t}`));

function policy(overrides: Partial<RetentionPolicy> = {}): RetentionPolicy {
  return { keep: {}, deltaRetentionMs: 0, chunkMaxAgeMs: 24 * 3_600_000, calendar: new Calendar('UTC'), ...overrides };
}

/** Each snapshot's decision as "keep|delete <ISO time> <rule>", oldest first. */
function decide(snapshots: CatalogEntry[], p: RetentionPolicy, now: string, restorableFull?: string): string[] {
  const fulls = snapshots.filter((s) => s.kind === 'Full');
  const plan = planRetention({ snapshots, chunks: [] }, p, {
    now: new Date(now),
    restorableFull: restorableFull ?? fulls.at(-1)?.name,
  });
  return plan.decisions.map(
    (d) => `${d.action} ${d.kind} ${new Date(d.createdAt * 1000).toISOString().slice(0, 16)} ${d.rule}`,
  );
}

describe("ebr's Exponential policy", () => {
  it('keeps the current hour, the newest an hour today, a day for the 7 days before, a week for 4 weeks', () => {
    const snapshots = fullsAt(
      '2026-01-20T12:00:00Z', // 49 days before: older than 4 weeks
      '2026-02-27T12:00:00Z', // 11 days: same week as the next one
      '2026-02-28T12:00:00Z', // 10 days: newest of its week
      '2026-03-05T12:00:00Z', // 5 days: newest of its day
      '2026-03-09T10:00:00Z', // yesterday, earlier
      '2026-03-09T23:00:00Z', // yesterday's newest
      '2026-03-10T09:00:00Z', // today, 09h: newest of its hour
      '2026-03-10T13:10:00Z', // today, 13h: not the newest of 13h
      '2026-03-10T13:50:00Z',
      '2026-03-10T14:05:00Z', // the current hour: every one
      '2026-03-10T14:20:00Z',
    );
    expect(decide(snapshots, policy({ ebr: { policy: 'Exponential' } }), '2026-03-10T14:30:00Z')).toEqual([
      'delete Full 2026-01-20T12:00 Exponential (older than 4 weeks)',
      'delete Full 2026-02-27T12:00 Exponential (weekly: not its newest)',
      'keep Full 2026-02-28T12:00 Exponential (weekly: newest)',
      'keep Full 2026-03-05T12:00 Exponential (daily: newest)',
      'delete Full 2026-03-09T10:00 Exponential (daily: not its newest)',
      'keep Full 2026-03-09T23:00 Exponential (daily: newest)',
      'keep Full 2026-03-10T09:00 Exponential (hourly: newest)',
      'delete Full 2026-03-10T13:10 Exponential (hourly: not its newest)',
      'keep Full 2026-03-10T13:50 Exponential (hourly: newest)',
      'keep Full 2026-03-10T14:05 Exponential (current hour)',
      `keep Full 2026-03-10T14:20 ${NEWEST_CHAIN}`,
    ]);
  });

  it("counts days in UTC across a month end, and weeks from the end of yesterday, as ebr's arithmetic does", () => {
    const snapshots = fullsAt(
      '2026-02-20T01:00:00Z', // 9 days before the end of Feb 28 (eod shifted): week 1
      '2026-02-21T22:00:00Z', // week 1 too, newer: kept
      '2026-02-22T01:00:00Z', // 7 days before today: daily, newest of Feb 22
      '2026-02-28T23:30:00Z', // yesterday, across the month end
      '2026-03-01T00:10:00Z', // today, the current hour
    );
    expect(decide(snapshots, policy({ ebr: { policy: 'Exponential' } }), '2026-03-01T00:30:00Z')).toEqual([
      'delete Full 2026-02-20T01:00 Exponential (weekly: not its newest)',
      'keep Full 2026-02-21T22:00 Exponential (weekly: newest)',
      'keep Full 2026-02-22T01:00 Exponential (daily: newest)',
      'keep Full 2026-02-28T23:30 Exponential (daily: newest)',
      `keep Full 2026-03-01T00:10 ${NEWEST_CHAIN}`,
    ]);
  });
});

describe("ebr's LimitBased policy", () => {
  it('keeps the newest --max-backups fulls', () => {
    const snapshots = fullsAt(
      '2026-03-01T00:00:00Z',
      '2026-03-02T00:00:00Z',
      '2026-03-03T00:00:00Z',
      '2026-03-04T00:00:00Z',
    );
    expect(decide(snapshots, policy({ ebr: { policy: 'LimitBased', maxBackups: 2 } }), '2026-03-05T00:00:00Z')).toEqual(
      [
        'delete Full 2026-03-01T00:00 LimitBased (older than the newest 2)',
        'delete Full 2026-03-02T00:00 LimitBased (older than the newest 2)',
        'keep Full 2026-03-03T00:00 LimitBased (among the newest 2)',
        `keep Full 2026-03-04T00:00 ${NEWEST_CHAIN}`,
      ],
    );
  });
});

describe('keep rules', () => {
  const monthEnds = fullsAt(
    '2026-01-31T23:00:00Z',
    '2026-02-01T01:00:00Z',
    '2026-02-28T22:00:00Z',
    '2026-03-01T00:10:00Z',
  );

  it('--keep-monthly counts calendar months in the time zone: a month end at 23:00 UTC is the next month in Berlin', () => {
    const now = '2026-03-02T00:00:00Z';
    expect(decide(monthEnds, policy({ keep: { monthly: 3 } }), now)).toEqual([
      'keep Full 2026-01-31T23:00 keep-monthly',
      'delete Full 2026-02-01T01:00 no rule keeps it',
      'keep Full 2026-02-28T22:00 keep-monthly',
      `keep Full 2026-03-01T00:10 ${NEWEST_CHAIN}`,
    ]);
    expect(decide(monthEnds, policy({ keep: { monthly: 3 }, calendar: new Calendar('Europe/Berlin') }), now)).toEqual([
      'delete Full 2026-01-31T23:00 no rule keeps it',
      'delete Full 2026-02-01T01:00 no rule keeps it',
      'keep Full 2026-02-28T22:00 keep-monthly',
      `keep Full 2026-03-01T00:10 ${NEWEST_CHAIN}`,
    ]);
  });

  it('--keep-hourly: the hour repeated when clocks go back counts once; the hour skipped going forward holds nothing', () => {
    const berlin = policy({ keep: { hourly: 3 }, calendar: new Calendar('Europe/Berlin') });
    // 2026-10-25: 03:00 CEST becomes 02:00 CET at 01:00 UTC; 00:30Z and 01:30Z are both 02:30 local.
    const fallBack = fullsAt(
      '2026-10-24T23:30:00Z',
      '2026-10-25T00:30:00Z',
      '2026-10-25T01:30:00Z',
      '2026-10-25T02:30:00Z',
    );
    expect(decide(fallBack, berlin, '2026-10-25T03:00:00Z')).toEqual([
      'keep Full 2026-10-24T23:30 keep-hourly',
      'delete Full 2026-10-25T00:30 no rule keeps it',
      'keep Full 2026-10-25T01:30 keep-hourly',
      `keep Full 2026-10-25T02:30 ${NEWEST_CHAIN}`,
    ]);
    // 2026-03-29: 02:00 CET becomes 03:00 CEST at 01:00 UTC; 00:30Z is 01:30 local, 01:30Z is 03:30.
    const springForward = fullsAt('2026-03-29T00:10:00Z', '2026-03-29T00:30:00Z', '2026-03-29T01:30:00Z');
    expect(
      decide(
        springForward,
        policy({ keep: { hourly: 2 }, calendar: new Calendar('Europe/Berlin') }),
        '2026-03-29T02:00:00Z',
      ),
    ).toEqual([
      'delete Full 2026-03-29T00:10 no rule keeps it',
      'keep Full 2026-03-29T00:30 keep-hourly',
      `keep Full 2026-03-29T01:30 ${NEWEST_CHAIN}`,
    ]);
  });

  it('--keep-daily follows the local day across a daylight-saving change; --keep-weekly counts ISO weeks', () => {
    const berlin = new Calendar('Europe/Berlin');
    // 21:30Z on Oct 24 is 23:30 CEST (Oct 24); 22:30Z is 00:30 CEST (Oct 25); 22:30Z on Oct 25, after the
    // change, is 23:30 CET (still Oct 25). In UTC the first two share a day instead.
    const days = fullsAt('2026-10-24T21:30:00Z', '2026-10-24T22:30:00Z', '2026-10-25T22:30:00Z');
    expect(decide(days, policy({ keep: { daily: 3 }, calendar: berlin }), '2026-10-26T00:00:00Z')).toEqual([
      'keep Full 2026-10-24T21:30 keep-daily',
      'delete Full 2026-10-24T22:30 no rule keeps it',
      `keep Full 2026-10-25T22:30 ${NEWEST_CHAIN}`,
    ]);
    expect(decide(days, policy({ keep: { daily: 3 } }), '2026-10-26T00:00:00Z')).toEqual([
      'delete Full 2026-10-24T21:30 no rule keeps it',
      'keep Full 2026-10-24T22:30 keep-daily',
      `keep Full 2026-10-25T22:30 ${NEWEST_CHAIN}`,
    ]);
    // 2025-12-28 is a Sunday in 2025-W52; 2025-12-29 and 2026-01-04 are in 2026-W1.
    const weeks = fullsAt('2025-12-28T12:00:00Z', '2025-12-29T12:00:00Z', '2026-01-04T12:00:00Z');
    expect(decide(weeks, policy({ keep: { weekly: 5 } }), '2026-01-05T00:00:00Z')).toEqual([
      'keep Full 2025-12-28T12:00 keep-weekly',
      'delete Full 2025-12-29T12:00 no rule keeps it',
      `keep Full 2026-01-04T12:00 ${NEWEST_CHAIN}`,
    ]);
  });

  it('--keep-last and --keep-within (before the newest full, not before now) combine: any rule keeps', () => {
    const snapshots = fullsAt(
      '2026-03-01T00:00:00Z',
      '2026-03-05T00:00:00Z',
      '2026-03-06T00:00:00Z',
      '2026-03-07T00:00:00Z',
    );
    // A year later: keep-within still counts from the newest full, so a store whose backups stopped keeps them.
    expect(decide(snapshots, policy({ keep: { last: 2, withinMs: 2 * 86_400_000 } }), '2027-03-01T00:00:00Z')).toEqual([
      'delete Full 2026-03-01T00:00 no rule keeps it',
      'keep Full 2026-03-05T00:00 keep-within',
      'keep Full 2026-03-06T00:00 keep-last, keep-within',
      `keep Full 2026-03-07T00:00 ${NEWEST_CHAIN}`,
    ]);
  });
});

describe('deltas and the newest restorable chain', () => {
  const snapshots = store(
    'Full 0 10 2026-03-01T00:00:00Z',
    'Incr 11 20 2026-03-01T06:00:00Z',
    'Incr 21 30 2026-03-01T23:00:00Z',
    'Full 0 30 2026-03-02T00:00:00Z',
    'Incr 31 40 2026-03-02T06:00:00Z',
    'Full 0 40 2026-03-03T00:00:00Z',
    'Incr 41 50 2026-03-03T06:00:00Z',
  );

  it('--delta-snapshot-retention-period: older deltas go, younger stay, those after the newest full always stay', () => {
    expect(
      decide(snapshots, policy({ keep: { last: 3 }, deltaRetentionMs: 31 * 3_600_000 }), '2026-03-03T12:00:00Z'),
    ).toEqual([
      'keep Full 2026-03-01T00:00 keep-last',
      'delete Incr 2026-03-01T06:00 older than the delta retention period',
      'delete Incr 2026-03-01T23:00 older than the delta retention period',
      'keep Full 2026-03-02T00:00 keep-last',
      'keep Incr 2026-03-02T06:00 delta retention period',
      `keep Full 2026-03-03T00:00 ${NEWEST_CHAIN}`,
      `keep Incr 2026-03-03T06:00 ${NEWEST_CHAIN}`,
    ]);
  });

  it('when the newest full does not verify, the one before it and every delta after that are kept whatever the rules say', () => {
    const restorable = snapshots[3].name;
    expect(
      decide(snapshots, policy({ ebr: { policy: 'LimitBased', maxBackups: 1 } }), '2026-03-03T12:00:00Z', restorable),
    ).toEqual([
      'delete Full 2026-03-01T00:00 LimitBased (older than the newest 1)',
      'delete Incr 2026-03-01T06:00 older than the delta retention period',
      'delete Incr 2026-03-01T23:00 older than the delta retention period',
      `keep Full 2026-03-02T00:00 ${NEWEST_CHAIN}`,
      `keep Incr 2026-03-02T06:00 ${NEWEST_CHAIN}`,
      'keep Full 2026-03-03T00:00 LimitBased (among the newest 1)',
      `keep Incr 2026-03-03T06:00 ${NEWEST_CHAIN}`,
    ]);
  });

  it('--max-total-size deletes the oldest kept first, never the newest chain, and warns when that alone is too big', () => {
    const sized = store(
      'Full 0 10 2026-03-01T00:00:00Z 400',
      'Full 0 20 2026-03-02T00:00:00Z 400',
      'Full 0 30 2026-03-03T00:00:00Z 400',
      'Incr 31 40 2026-03-03T06:00:00Z 50',
    );
    expect(decide(sized, policy({ keep: { last: 3 }, maxTotalSize: 900 }), '2026-03-04T00:00:00Z')).toEqual([
      'delete Full 2026-03-01T00:00 max total size (was kept by: keep-last)',
      'keep Full 2026-03-02T00:00 keep-last',
      `keep Full 2026-03-03T00:00 ${NEWEST_CHAIN}`,
      `keep Incr 2026-03-03T06:00 ${NEWEST_CHAIN}`,
    ]);
    const plan = planRetention({ snapshots: sized, chunks: [] }, policy({ keep: { last: 3 }, maxTotalSize: 100 }), {
      now: new Date('2026-03-04T00:00:00Z'),
      restorableFull: sized[2].name,
    });
    expect(plan.decisions.filter((d) => d.action === 'keep').map((d) => d.rule)).toEqual([NEWEST_CHAIN, NEWEST_CHAIN]);
    expect(plan.warnings).toEqual([expect.stringContaining('the newest restorable chain alone holds 450 bytes')]);
  });
});

describe("ebr's chunk objects and other objects", () => {
  it('deletes chunks of complete snapshots and of abandoned uploads, keeps those of an upload in progress', () => {
    const snapshots = fullsAt('2026-03-01T00:00:00Z');
    const chunk = (name: string): ChunkEntry => ({ ...parseChunkName(name)!, size: 5 });
    const plan = planRetention(
      {
        snapshots,
        chunks: [
          chunk(`${snapshots[0].name}/0000000001`),
          chunk('v2/Full-00000000-00000099-1772319600.gz/0000000001'), // 2026-02-28T23:00Z, no such snapshot
          chunk('v2/Full-00000000-00000099-1772409000.gz/0000000002'), // 2026-03-01T23:50Z, no such snapshot
        ],
        others: [{}, {}],
      },
      policy({ keep: { last: 1 } }),
      { now: new Date('2026-03-02T00:00:00Z'), restorableFull: snapshots[0].name },
    );
    expect(plan.decisions.slice(1).map((d) => `${d.action} ${d.rule}`)).toEqual([
      'delete ebr chunk of a complete snapshot',
      'delete ebr chunk of an abandoned upload',
      'keep ebr chunk of an upload in progress',
    ]);
    expect(plan.untouched).toBe(2);
  });

  it('reads chunk names in both layouts and nothing else as chunks', () => {
    expect(parseChunkName('v2/Full-00000000-00000010-100.gz/0000000003')?.snapshot.name).toBe(
      'v2/Full-00000000-00000010-100.gz',
    );
    expect(parseChunkName('v1/Backup-100/Full-00000000-00000010-100/0000000001')?.snapshot.kind).toBe('Full');
    expect(parseChunkName('v2/Full-00000000-00000010-100.gz')).toBeUndefined();
    expect(parseChunkName('v2/notes/0000000001')).toBeUndefined();
    expect(parseSnapshotName('v2/Full-00000000-00000010-100.gz/0000000003')).toBeUndefined();
  });
});
