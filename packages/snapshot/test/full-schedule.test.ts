import { FullSchedule } from '@etcd-steward/snapshot';
import { describe, expect, it } from 'vitest';

const at = (iso: string) => new Date(iso);
const unix = (iso: string) => Math.floor(Date.parse(iso) / 1000);

describe('FullSchedule', () => {
  it("reads ebr's window from the schedule", () => {
    expect(new FullSchedule('0 */1 * * *').windowHours).toBe(1);
    expect(new FullSchedule('0 */6 * * *').windowHours).toBe(6);
    expect(new FullSchedule('0 0 * * *').windowHours).toBe(24);
    expect(new FullSchedule('0 0 * * 1').windowHours).toBe(168);
    expect(new FullSchedule('*/20 * * * * *').windowHours).toBe(24);
  });

  it('knows the longest time between two of its runs, which the full-snapshot alert allows', () => {
    const now = at('2026-11-22T10:30:00');
    expect(new FullSchedule('0 */1 * * *').longestGapSeconds(now)).toBe(3_600);
    expect(new FullSchedule('*/3 * * * * *').longestGapSeconds(now)).toBe(3);
    // uneven runs: 02:00 and 20:00, so 18 h from 02:00 to 20:00
    expect(new FullSchedule('0 2,20 * * *').longestGapSeconds(now)).toBe(18 * 3_600);
    expect(new FullSchedule('0 0 * * 1').longestGapSeconds(now)).toBe(7 * 24 * 3_600);
    expect(new FullSchedule('0 0 1 * *').longestGapSeconds(now)).toBe(31 * 24 * 3_600);
  });

  it('refuses what is not a 5- or 6-field cron schedule', () => {
    expect(() => new FullSchedule('* * * *')).toThrow(/4 fields, expected 5/);
    expect(() => new FullSchedule('61 * * * *')).toThrow(/not a cron schedule/);
  });

  describe("start-up rules (ebr's IsFullSnapshotRequiredAtStartup)", () => {
    const hourly = new FullSchedule('0 */1 * * *');
    const daily = new FullSchedule('0 0 * * *');
    const now = at('2026-11-22T10:30:00');

    it('is due with no full snapshot, after a final one, or after a failed attempt', () => {
      expect(hourly.dueAtStart(undefined, false, now)).toMatch(/no full snapshot/);
      expect(hourly.dueAtStart({ createdAt: unix('2026-11-22T10:00:00'), final: true }, false, now)).toMatch(/final/);
      expect(hourly.dueAtStart({ createdAt: unix('2026-11-22T10:00:00'), final: false }, true, now)).toMatch(/failed/);
    });

    it('is due when the last one is older than the window', () => {
      expect(hourly.dueAtStart({ createdAt: unix('2026-11-22T09:00:00'), final: false }, false, now)).toMatch(
        /older than 1h/,
      );
    });

    it('is not due when the last scheduled run was taken', () => {
      expect(hourly.dueAtStart({ createdAt: unix('2026-11-22T10:00:00'), final: false }, false, now)).toBeUndefined();
      expect(daily.dueAtStart({ createdAt: unix('2026-11-22T00:00:00'), final: false }, false, now)).toBeUndefined();
    });

    it('is due when a run was missed and waiting for the next would exceed the window', () => {
      // daily at midnight; the last full is a manual one from 23:00, so midnight's run was missed and the
      // next (tomorrow's) would come 25 h after it
      const late = at('2026-11-22T00:30:00');
      expect(daily.dueAtStart({ createdAt: unix('2026-11-21T23:00:00'), final: false }, false, late)).toMatch(/missed/);
      // hourly with a daily window ("0 * * * *"): 10:00 was missed, but 11:00 comes well within the window
      const everyHour = new FullSchedule('0 * * * *');
      expect(
        everyHour.dueAtStart({ createdAt: unix('2026-11-22T09:10:00'), final: false }, false, now),
      ).toBeUndefined();
    });
  });
});
