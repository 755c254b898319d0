import type { CatalogEntry, StoreCatalog } from '../backup/snapshot-catalog.js';
import type { Calendar } from './calendar.js';
import { type EbrPolicy, ebrPolicyVerdicts } from './ebr-policies.js';
import { type KeepRules, keepRuleKeeps } from './keep-rules.js';

export interface RetentionPolicy {
  ebr?: EbrPolicy;
  keep: KeepRules;
  /** Deltas not in the newest chain go once older than this (ebr's --delta-snapshot-retention-period; 0: at once). */
  deltaRetentionMs: number;
  /** A cap on the bytes of all snapshots kept: the oldest kept go first until the rest fits. */
  maxTotalSize?: number;
  /** An ebr chunk whose snapshot never appeared is an abandoned upload once this old. */
  chunkMaxAgeMs: number;
  calendar: Calendar;
}

export type ObjectKind = 'Full' | 'Incr' | 'chunk';

/** What the plan says of one object, and the rule that decided it. */
export interface Decision {
  name: string;
  kind: ObjectKind;
  /** Unix seconds, from the name. */
  createdAt: number;
  size: number;
  action: 'keep' | 'delete';
  rule: string;
}

export interface RetentionPlan {
  /** Snapshots oldest first, then chunks. */
  decisions: Decision[];
  /** Objects whose names do not parse: never touched. */
  untouched: number;
  /** The full the newest restorable chain starts from, if any. */
  restorableFull?: string;
  warnings: string[];
}

export const NEWEST_CHAIN = 'newest restorable chain';

/**
 * Decides every snapshot and chunk of a catalog. Pure: the same catalog, policy and clock give the same plan.
 * `restorableFull` is the newest full that verifies (the caller checked it); it and every delta after it are
 * kept whatever the rules say. Fulls are kept when any rule keeps them; deltas outside that chain go by age
 * (a newer full always covers their revisions, so the chain they belonged to is never the newest).
 */
export function planRetention(
  catalog: Pick<StoreCatalog, 'snapshots' | 'chunks'> & { others?: readonly unknown[] },
  policy: RetentionPolicy,
  options: { now: Date; restorableFull?: string },
): RetentionPlan {
  const { snapshots } = catalog;
  const nowSeconds = options.now.getTime() / 1000;
  const fulls = snapshots.filter((e) => e.kind === 'Full');
  const base = snapshots.find((e) => e.name === options.restorableFull && e.kind === 'Full');
  const ebr = policy.ebr ? ebrPolicyVerdicts(fulls, policy.ebr, options.now) : undefined;
  const rules = keepRuleKeeps(fulls, policy.keep, policy.calendar);
  const protectedAfter = base?.lastRevision ?? Number.POSITIVE_INFINITY;

  const decisions: Decision[] = snapshots.map((entry) => {
    const decide = (action: Decision['action'], rule: string): Decision => ({
      name: entry.name,
      kind: entry.kind,
      createdAt: entry.createdAt,
      size: entry.size,
      action,
      rule,
    });
    if (entry === base || (entry.kind === 'Incr' && entry.lastRevision > protectedAfter)) {
      return decide('keep', NEWEST_CHAIN);
    }
    if (entry.kind === 'Incr') {
      const kept = entry.createdAt >= nowSeconds - policy.deltaRetentionMs / 1000;
      return decide(
        kept ? 'keep' : 'delete',
        kept ? 'delta retention period' : 'older than the delta retention period',
      );
    }
    const keeping = [
      ...(ebr?.get(entry.name)?.keep ? [ebr.get(entry.name)!.rule] : []),
      ...(rules.get(entry.name) ?? []),
    ];
    if (keeping.length > 0) return decide('keep', keeping.join(', '));
    return decide('delete', ebr?.get(entry.name)?.rule ?? 'no rule keeps it');
  });

  const warnings: string[] = [];
  if (policy.maxTotalSize !== undefined) capTotalSize(decisions, policy.maxTotalSize, warnings);

  const complete = new Set(snapshots.map((e) => e.name));
  for (const chunk of catalog.chunks) {
    const done = complete.has(chunk.snapshot.name);
    const abandoned = chunk.snapshot.createdAt < nowSeconds - policy.chunkMaxAgeMs / 1000;
    decisions.push({
      name: chunk.name,
      kind: 'chunk',
      createdAt: chunk.snapshot.createdAt,
      size: chunk.size,
      action: done || abandoned ? 'delete' : 'keep',
      rule: done
        ? 'ebr chunk of a complete snapshot'
        : abandoned
          ? 'ebr chunk of an abandoned upload'
          : 'ebr chunk of an upload in progress',
    });
  }
  return { decisions, untouched: catalog.others?.length ?? 0, restorableFull: base?.name, warnings };
}

/** Deletes the oldest kept snapshots (never the newest chain) until what stays fits in `cap` bytes. */
function capTotalSize(decisions: Decision[], cap: number, warnings: string[]): void {
  let total = decisions.reduce((sum, d) => sum + (d.action === 'keep' ? d.size : 0), 0);
  for (const d of decisions) {
    if (total <= cap) return;
    if (d.action !== 'keep' || d.rule === NEWEST_CHAIN) continue;
    d.action = 'delete';
    d.rule = `max total size (was kept by: ${d.rule})`;
    total -= d.size;
  }
  if (total > cap) {
    warnings.push(
      `the newest restorable chain alone holds ${total} bytes, more than --max-total-size ${cap}: it is kept`,
    );
  }
}

/** The snapshots a plan keeps, oldest first: what a restore after the deletions sees. */
export function keptSnapshots(snapshots: readonly CatalogEntry[], plan: RetentionPlan): CatalogEntry[] {
  const deleted = new Set(plan.decisions.filter((d) => d.action === 'delete').map((d) => d.name));
  return snapshots.filter((e) => !deleted.has(e.name));
}
