import { UsageError } from '../common/errors.js';

/** A moment as a wall clock in one time zone shows it. */
export interface WallClock {
  year: number;
  month: number;
  day: number;
  hour: number;
}

/**
 * Reads moments in a time zone (an IANA name such as Europe/Berlin, or UTC): the keep rules count hours, days,
 * weeks and months as the people who set them do, across month ends and daylight-saving changes. The hour
 * repeated when clocks go back counts as one hour; the hour skipped when they go forward holds nothing.
 */
export class Calendar {
  private readonly format: Intl.DateTimeFormat;

  constructor(readonly timeZone: string) {
    try {
      this.format = new Intl.DateTimeFormat('en-US', {
        timeZone,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
      });
    } catch {
      throw new UsageError(
        `--time-zone "${timeZone}" is not a time zone: give an IANA name, e.g. UTC or Europe/Berlin`,
      );
    }
  }

  wallClock(unixSeconds: number): WallClock {
    const parts: Record<string, number> = {};
    for (const p of this.format.formatToParts(unixSeconds * 1000)) {
      if (p.type !== 'literal') parts[p.type] = Number(p.value);
    }
    return { year: parts.year, month: parts.month, day: parts.day, hour: parts.hour };
  }
}

/** The calendar's buckets a keep rule counts in, as keys that differ exactly when the buckets do. */
export const BUCKETS = {
  hourly: (c: WallClock) => `${c.year}-${c.month}-${c.day} ${c.hour}`,
  daily: (c: WallClock) => `${c.year}-${c.month}-${c.day}`,
  weekly: (c: WallClock) => isoWeek(c),
  monthly: (c: WallClock) => `${c.year}-${c.month}`,
} as const;

/** ISO 8601 week (weeks start on Monday; week 1 holds the year's first Thursday), e.g. "2026-W01". */
function isoWeek(c: WallClock): string {
  const date = new Date(Date.UTC(c.year, c.month - 1, c.day));
  const weekday = date.getUTCDay() || 7;
  date.setUTCDate(date.getUTCDate() + 4 - weekday); // the Thursday of this week decides its year
  const year = date.getUTCFullYear();
  const week = Math.ceil(((date.getTime() - Date.UTC(year, 0, 1)) / 86_400_000 + 1) / 7);
  return `${year}-W${week}`;
}
