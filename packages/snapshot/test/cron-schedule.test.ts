import { CronSchedule } from '@etcd-steward/snapshot';
import { describe, expect, it } from 'vitest';

/** Local time, as the schedule reads it. */
const at = (iso: string) => new Date(iso);
const next = (spec: string, from: string) => new CronSchedule(spec, 'schedule').next(at(from));
const previous = (spec: string, from: string) => new CronSchedule(spec, 'schedule').previous(at(from));

describe('CronSchedule', () => {
  it('fires at the next matching minute, strictly after now', () => {
    expect(next('0 */1 * * *', '2026-11-22T10:30:00')).toEqual(at('2026-11-22T11:00:00'));
    expect(next('0 */1 * * *', '2026-11-22T11:00:00')).toEqual(at('2026-11-22T12:00:00'));
    expect(next('*/15 * * * *', '2026-11-22T10:59:59.500')).toEqual(at('2026-11-22T11:00:00'));
    expect(next('23 0-20/2 * * *', '2026-11-22T20:30:00')).toEqual(at('2026-11-23T00:23:00'));
    expect(next('0 0,12 1 */2 *', '2026-11-22T10:30:00')).toEqual(at('2027-01-01T00:00:00'));
  });

  it('reads names, Sunday as 0 or 7, and a day that matches either day field', () => {
    expect(next('0 9 * * mon-fri', '2026-11-21T10:00:00')).toEqual(at('2026-11-23T09:00:00')); // a Saturday
    expect(next('0 9 * * 7', '2026-11-21T10:00:00')).toEqual(at('2026-11-22T09:00:00'));
    expect(next('0 0 * JUL *', '2026-11-22T10:00:00')).toEqual(at('2027-07-01T00:00:00'));
    // the 1st of the month or any Wednesday: Wednesday the 25th comes first
    expect(next('0 0 1 * wed', '2026-11-22T10:00:00')).toEqual(at('2026-11-25T00:00:00'));
    // every other day of the month, restricted by `*/2`, and any day of the week: the days of the month decide
    expect(next('0 0 */2 * *', '2026-11-22T10:00:00')).toEqual(at('2026-11-23T00:00:00'));
  });

  it('skips months without the day, and finds February 29th', () => {
    expect(next('0 0 31 * *', '2026-11-22T10:00:00')).toEqual(at('2026-12-31T00:00:00'));
    expect(next('0 0 29 2 *', '2026-11-22T10:00:00')).toEqual(at('2028-02-29T00:00:00'));
  });

  it('takes seconds as a sixth field first, and the descriptors', () => {
    expect(next('*/20 * * * * *', '2026-11-22T10:30:41')).toEqual(at('2026-11-22T10:31:00'));
    expect(next('@daily', '2026-11-22T10:30:00')).toEqual(at('2026-11-23T00:00:00'));
    expect(next('@hourly', '2026-11-22T10:30:00')).toEqual(at('2026-11-22T11:00:00'));
    expect(next('@weekly', '2026-11-22T10:30:00')).toEqual(at('2026-11-29T00:00:00'));
    expect(next('@yearly', '2026-11-22T10:30:00')).toEqual(at('2027-01-01T00:00:00'));
  });

  it('finds the last time it fired, strictly before now', () => {
    expect(previous('0 */1 * * *', '2026-11-22T10:30:00')).toEqual(at('2026-11-22T10:00:00'));
    expect(previous('0 */1 * * *', '2026-11-22T10:00:00')).toEqual(at('2026-11-22T09:00:00'));
    expect(previous('0 0 31 * *', '2026-11-22T10:00:00')).toEqual(at('2026-10-31T00:00:00'));
    expect(previous('30 2 * * sun', '2026-11-22T01:00:00')).toEqual(at('2026-11-15T02:30:00'));
  });

  it('steps over the hour a clock change skips, and fires in both runs of the hour it repeats', () => {
    const zone = process.env.TZ;
    process.env.TZ = 'Europe/Berlin';
    try {
      // 2024-03-31 02:00 CET becomes 03:00 CEST: 02:30 does not exist that day
      expect(next('30 2 * * *', '2024-03-30T12:00:00Z')).toEqual(at('2024-04-01T00:30:00Z'));
      expect(previous('30 2 * * *', '2024-03-31T12:00:00Z')).toEqual(at('2024-03-30T01:30:00Z'));
      // 2024-10-27 03:00 CEST becomes 02:00 CET: 02:00 comes twice
      expect(next('0 */1 * * *', '2024-10-27T00:30:00Z')).toEqual(at('2024-10-27T01:00:00Z'));
      expect(previous('0 */1 * * *', '2024-10-27T01:30:00Z')).toEqual(at('2024-10-27T01:00:00Z'));
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  it('refuses what is not a schedule, naming the field', () => {
    const refused = (spec: string) => () => new CronSchedule(spec, 'schedule');
    expect(refused('* * * *')).toThrow('--schedule "* * * *" is not a cron schedule (4 fields, expected 5)');
    expect(refused('61 * * * *')).toThrow('("61" is not a minute (0–59))');
    expect(refused('0 0 * foo *')).toThrow('("foo" is not a month (1–12))');
    expect(refused('*/0 * * * *')).toThrow('the step must be a whole number of at least 1');
    expect(refused('5-1 * * * *')).toThrow('5 comes after 1');
    expect(refused('0 0 30 2 *')).toThrow('no date matches it');
  });
});
