import { CronSchedule } from '../cron-schedule.js';

const HOUR = 3_600_000;
/** ebr's window when the schedule does not say one: at least one full snapshot a day. */
const DEFAULT_WINDOW_HOURS = 24;
/** Bounds longestGapSeconds' work for a schedule that runs every second. */
const MAX_RUNS = 20_000;

/** The last full snapshot as the start-up decision needs it. */
export interface LastFull {
  /** Unix seconds. */
  createdAt: number;
  final: boolean;
}

/**
 * When full snapshots are due: a cron schedule (`--schedule`, 5 fields as ebr's, or 6 with seconds), and the
 * rules ebr applies at start-up to decide whether one is due at once.
 */
export class FullSchedule extends CronSchedule {
  /** The longest a store should go without a full snapshot, in hours (ebr's GetFullSnapshotMaxTimeWindow). */
  readonly windowHours: number;

  constructor(spec: string) {
    super(spec, 'schedule');
    this.windowHours = windowHours(spec);
  }

  /**
   * The longest time between two runs of the schedule from `now` on, in seconds: what an alert on the age of the
   * newest full snapshot allows (a schedule's runs need not be evenly spaced: `0 2,20 * * *`). Looks at least
   * eight days and thirteen runs ahead (weekly and monthly schedules), at most MAX_RUNS runs.
   */
  longestGapSeconds(now: Date): number {
    let longest = 0;
    let at = this.next(now);
    for (let runs = 1; runs < MAX_RUNS && (at.getTime() - now.getTime() < 8 * 24 * HOUR || runs < 13); runs++) {
      const next = this.next(at);
      longest = Math.max(longest, next.getTime() - at.getTime());
      at = next;
    }
    return longest / 1000;
  }

  /**
   * ebr's IsFullSnapshotRequiredAtStartup: due when there is no full snapshot yet, the last one was a final one
   * (etcd may have been changed while no sidecar watched), it is older than the window, the last attempt
   * failed, or a scheduled run was missed and waiting for the next would leave more than the window uncovered.
   * Returns the reason, or undefined when none is due.
   */
  dueAtStart(last: LastFull | undefined, lastAttemptFailed: boolean, now: Date): string | undefined {
    if (!last) return 'there is no full snapshot yet';
    if (last.final) return 'the last full snapshot is a final one';
    if (lastAttemptFailed) return 'the last full snapshot attempt failed';
    const takenAt = last.createdAt * 1000;
    const window = this.windowHours * HOUR;
    if (now.getTime() - takenAt > window) return `the last full snapshot is older than ${this.windowHours}h`;
    const missed = this.previous(now).getTime() > takenAt;
    if (missed && this.next(now).getTime() - takenAt > window) return 'a scheduled full snapshot was missed';
    return undefined;
  }
}

/** ebr's reading of a schedule's window: weekly with a day-of-week, every N hours with `*\/N` hours, else daily. */
function windowHours(spec: string): number {
  let fields = spec.trim().split(/\s+/);
  if (fields.length === 6) fields = fields.slice(1); // seconds first
  if (fields.length < 5) return DEFAULT_WINDOW_HOURS;
  const [, hour, dayOfMonth, , dayOfWeek] = fields;
  if (dayOfWeek !== '*') return DEFAULT_WINDOW_HOURS * 7;
  if (dayOfMonth === '*' && hour.includes('/')) {
    const every = Number(hour.slice(hour.indexOf('/') + 1));
    if (Number.isFinite(every) && every > 0) return every;
  }
  return DEFAULT_WINDOW_HOURS;
}
