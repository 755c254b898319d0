import type { CatalogEntry } from '../backup/snapshot-catalog.js';

/** ebr's `--garbage-collection-policy`, with `--max-backups` for LimitBased. */
export type EbrPolicy = { policy: 'Exponential' } | { policy: 'LimitBased'; maxBackups: number };

export const EBR_POLICIES = ['Exponential', 'LimitBased'] as const;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** Go's math.MaxInt32, ebr's threshold past four weeks: every change divided by it is 0, so the full goes. */
const BEYOND = 2 ** 31 - 1;

/** What ebr's policy says of a full, and by which rule. */
export interface EbrVerdict {
  keep: boolean;
  rule: string;
}

/** ebr's policy's verdict on each full. `fulls` oldest first; the newest is always kept, as in ebr. */
export function ebrPolicyVerdicts(
  fulls: readonly CatalogEntry[],
  policy: EbrPolicy,
  now: Date,
): Map<string, EbrVerdict> {
  return policy.policy === 'LimitBased' ? limitBasedKeeps(fulls, policy.maxBackups) : exponentialKeeps(fulls, now);
}

/** The newest `maxBackups` fulls (and always the newest one). */
function limitBasedKeeps(fulls: readonly CatalogEntry[], maxBackups: number): Map<string, EbrVerdict> {
  const verdicts = new Map<string, EbrVerdict>();
  const first = fulls.length - Math.max(maxBackups, 1);
  for (const [i, f] of fulls.entries()) {
    const keep = i >= first;
    verdicts.set(f.name, { keep, rule: `LimitBased (${keep ? 'among' : 'older than'} the newest ${maxBackups})` });
  }
  return verdicts;
}

/**
 * ebr's Exponential policy, its arithmetic kept (docs/gc.md §2.1): walking from the newest full to the oldest,
 * a full is kept when the next newer full lies in another window, where the window depends on the older full's
 * age, counted back from the end of today (UTC): today's current hour keeps all, today's other hours the newest
 * per hour, the 7 days before today the newest per day, then the newest per week (weeks counted from the end of
 * yesterday) up to 5 weeks back; older fulls go. ebr compares each full with its next newer neighbour whether
 * that was kept or not, and so does this.
 */
function exponentialKeeps(fulls: readonly CatalogEntry[], now: Date): Map<string, EbrVerdict> {
  const verdicts = new Map<string, EbrVerdict>();
  if (fulls.length === 0) return verdicts;
  verdicts.set(fulls[fulls.length - 1].name, { keep: true, rule: 'Exponential (newest full)' });
  const nowMs = now.getTime();
  let eod = Math.floor(nowMs / DAY) * DAY + DAY - 1000; // 23:59:59 UTC today
  let trackingWeek = false;
  for (let i = fulls.length - 1; i > 0; i--) {
    const newer = fulls[i].createdAt * 1000;
    const older = fulls[i - 1].createdAt * 1000;
    const age = eod - older;
    let threshold: number;
    let window: string;
    if (age < DAY) {
      const currentHour = new Date(older).getUTCHours() === now.getUTCHours();
      threshold = currentHour ? 0 : 1;
      window = currentHour ? 'current hour' : 'hourly';
    } else if (age < 8 * DAY) {
      threshold = 24;
      window = 'daily';
    } else if (age < 35 * DAY) {
      if (!trackingWeek) {
        eod -= DAY;
        trackingWeek = true;
      }
      threshold = 24 * 7;
      window = 'weekly';
    } else {
      threshold = BEYOND;
      window = 'older than 4 weeks';
    }
    const count = (t: number, unit: number) => Math.trunc((eod - t) / unit);
    const hourChange = count(older, HOUR) - count(newer, HOUR);
    const dayChange = count(older, DAY) - count(newer, DAY);
    const weekChange = count(older, 7 * DAY) - count(newer, 7 * DAY);
    const keep =
      threshold === 0 ||
      Math.trunc(hourChange / threshold) !== 0 ||
      Math.trunc((dayChange * 24) / threshold) !== 0 ||
      Math.trunc((weekChange * 24 * 7) / threshold) !== 0;
    verdicts.set(fulls[i - 1].name, {
      keep,
      rule: `Exponential (${window}${threshold === 0 || threshold === BEYOND ? '' : keep ? ': newest' : ': not its newest'})`,
    });
  }
  return verdicts;
}
