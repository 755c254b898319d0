import { UsageError } from '@etcd-steward/core/common';

/*
 * Evaluated here rather than by a cron library: the one the sidecar used (cron-parser, with luxon) reads time
 * zones through Intl, which maps Node's ICU data: ~5 MB of the long-running sidecar's resident memory
 * (docs/performance.md, the sidecar's memory). Local time is the Date's own. Where the clock changes, a time
 * the clock skips does not fire that day, and one in the hour it repeats may fire in both.
 */

interface Field {
  name: string;
  min: number;
  max: number;
  /** Names of the values from `min` on. */
  names?: readonly string[];
}

const FIELDS: readonly Field[] = [
  { name: 'second', min: 0, max: 59 },
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  {
    name: 'month',
    min: 1,
    max: 12,
    names: ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'],
  },
  // 7 is Sunday too, as in most crons.
  { name: 'day of week', min: 0, max: 7, names: ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] },
];

/** ebr's descriptors (robfig/cron's), with seconds first. */
const DESCRIPTORS: Record<string, string> = {
  '@yearly': '0 0 0 1 1 *',
  '@annually': '0 0 0 1 1 *',
  '@monthly': '0 0 0 1 * *',
  '@weekly': '0 0 0 * * 0',
  '@daily': '0 0 0 * * *',
  '@midnight': '0 0 0 * * *',
  '@hourly': '0 0 * * * *',
};

/** How far a search looks before it decides that a schedule never fires (as on February 30th). */
const SEARCH_YEARS = 8;

/**
 * A cron schedule given by a flag: 5 fields as ebr's (minute hour day-of-month month day-of-week), or 6 with
 * seconds first, or one of ebr's descriptors (@hourly, @daily…), in local time. Each field takes `*`, `?`,
 * numbers, names (jan, mon), ranges, steps and lists. When both days are restricted a day matches either, as
 * in cron.
 */
export class CronSchedule {
  private readonly allowed: ReadonlyArray<ReadonlySet<number>>;
  /** Whether a day must match both day fields (one of them is `*`) or either. */
  private readonly bothDays: boolean;

  constructor(
    readonly spec: string,
    flag: string,
  ) {
    try {
      const text = DESCRIPTORS[spec.trim().toLowerCase()] ?? spec.trim();
      const fields = text.split(/\s+/);
      if (fields.length !== 5 && fields.length !== 6) throw new Error(`${fields.length} fields, expected 5`);
      if (fields.length === 5) fields.unshift('0');
      this.allowed = fields.map((f, i) => parseField(f, FIELDS[i]));
      this.bothDays = /^[*?]/.test(fields[3]) || /^[*?]/.test(fields[5]);
      if (this.find(new Date(2000, 0, 1), 1) === undefined) throw new Error('no date matches it');
    } catch (err) {
      throw new UsageError(
        `--${flag} "${spec}" is not a cron schedule (${(err as Error).message}); e.g. "0 */1 * * *"`,
      );
    }
  }

  /** The first time after `now` the schedule fires. */
  next(now: Date): Date {
    return this.find(now, 1)!;
  }

  /** The last time before `now` the schedule fired. */
  previous(now: Date): Date {
    return this.find(now, -1)!;
  }

  /**
   * Steps from `now` (exclusive) towards the future or the past, a field at a time from the month down: where a
   * field does not match, the time moves to the first (or last) instant of that field's next (or previous) value.
   */
  private find(now: Date, direction: 1 | -1): Date | undefined {
    const [seconds, minutes, hours, , months] = this.allowed;
    const forward = direction === 1;
    const t = new Date(Math.floor(now.getTime() / 1000) * 1000);
    if (forward || t.getTime() === now.getTime()) t.setTime(t.getTime() + direction * 1000);
    const limit = now.getFullYear() + direction * SEARCH_YEARS;
    while (forward ? t.getFullYear() <= limit : t.getFullYear() >= limit) {
      const before = t.getTime();
      if (!months.has(t.getMonth() + 1)) {
        if (forward) t.setMonth(t.getMonth() + 1, 1);
        else t.setDate(0); // the last day of the month before
        t.setHours(forward ? 0 : 23, forward ? 0 : 59, forward ? 0 : 59);
      } else if (!this.dayMatches(t)) {
        t.setDate(t.getDate() + direction);
        t.setHours(forward ? 0 : 23, forward ? 0 : 59, forward ? 0 : 59);
      } else if (!hours.has(t.getHours())) {
        t.setHours(t.getHours() + direction, forward ? 0 : 59, forward ? 0 : 59);
      } else if (!minutes.has(t.getMinutes())) {
        // Minutes and seconds move in absolute time, so that an hour the clock repeats is walked through twice.
        t.setTime(before - t.getSeconds() * 1000 + (forward ? 60_000 : -1_000));
      } else if (!seconds.has(t.getSeconds())) {
        t.setTime(before + direction * 1000);
      } else {
        return t;
      }
      // A local time that the clock skips (spring forward) resolves to one after the gap; past the gap then.
      if ((t.getTime() - before) * direction <= 0) t.setTime(before + direction * 1000);
    }
    return undefined;
  }

  private dayMatches(t: Date): boolean {
    const dayOfMonth = this.allowed[3].has(t.getDate());
    const dayOfWeek = this.allowed[5].has(t.getDay());
    return this.bothDays ? dayOfMonth && dayOfWeek : dayOfMonth || dayOfWeek;
  }
}

/** The values a field allows: a list of `*`, `?`, a value or a range, each with an optional `/step`. */
function parseField(text: string, field: Field): Set<number> {
  const values = new Set<number>();
  for (const part of text.split(',')) {
    const [range, stepText, extra] = part.split('/');
    if (extra !== undefined || range === '') throw new Error(`"${part}" is not a ${field.name}`);
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1 || !/^\d+$/.test(stepText ?? '1')) {
      throw new Error(`"${part}": the step must be a whole number of at least 1`);
    }
    let low: number;
    let high: number;
    if (range === '*' || range === '?') {
      [low, high] = [field.min, field.max];
    } else if (range.includes('-')) {
      const [from, to] = range.split('-');
      [low, high] = [value(from, field), value(to, field)];
      if (low > high) throw new Error(`"${part}": ${from} comes after ${to}`);
    } else {
      low = value(range, field);
      high = stepText === undefined ? low : field.max;
    }
    for (let v = low; v <= high; v += step) values.add(field.name === 'day of week' ? v % 7 : v);
  }
  return values;
}

function value(text: string, field: Field): number {
  const named = field.names?.indexOf(text.toLowerCase()) ?? -1;
  const v = named >= 0 ? field.min + named : /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!(v >= field.min && v <= field.max)) {
    throw new Error(`"${text}" is not a ${field.name} (${field.min}–${field.max})`);
  }
  return v;
}
