import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import { BUCKETS, type Calendar } from './calendar.js';

/** restic's keep rules; each keeps some full snapshots, and a full is kept when any rule keeps it. */
export interface KeepRules {
  /** The newest n fulls. */
  last?: number;
  /** The newest full of each of the newest n hours (days, ISO weeks, months) that hold one. */
  hourly?: number;
  daily?: number;
  weekly?: number;
  monthly?: number;
  /** Every full taken within this many milliseconds before the newest full (not before now: a store whose backups stopped keeps them). */
  withinMs?: number;
}

export function hasKeepRules(rules: KeepRules): boolean {
  return Object.values(rules).some((v) => v !== undefined);
}

/**
 * The rules that keep each full, by name. `fulls` oldest first. As restic does: the fulls newest first, and
 * each bucket rule keeps a full when its bucket differs from that of the last full the rule kept, until the
 * rule has kept its count.
 */
export function keepRuleKeeps(
  fulls: readonly CatalogEntry[],
  rules: KeepRules,
  calendar: Calendar,
): Map<string, string[]> {
  const kept = new Map<string, string[]>();
  const keep = (name: string, rule: string) => kept.set(name, [...(kept.get(name) ?? []), rule]);
  const newest = fulls.at(-1);
  if (!newest) return kept;
  const counters = (Object.keys(BUCKETS) as (keyof typeof BUCKETS)[])
    .filter((b) => (rules[b] ?? 0) > 0)
    .map((b) => ({ bucket: b, left: rules[b]!, last: undefined as string | undefined }));
  let last = rules.last ?? 0;
  for (let i = fulls.length - 1; i >= 0; i--) {
    const full = fulls[i];
    if (last > 0) {
      keep(full.name, 'keep-last');
      last--;
    }
    if (rules.withinMs !== undefined && (newest.createdAt - full.createdAt) * 1000 <= rules.withinMs) {
      keep(full.name, 'keep-within');
    }
    if (counters.length === 0) continue;
    const clock = calendar.wallClock(full.createdAt);
    for (const c of counters) {
      if (c.left === 0) continue;
      const key = BUCKETS[c.bucket](clock);
      if (key === c.last) continue;
      c.last = key;
      c.left--;
      keep(full.name, `keep-${c.bucket}`);
    }
  }
  return kept;
}
