import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../src/backup/snapshot-catalog.js';
import { planChains } from '../src/backup/snapshot-chain.js';
import { snapshotName } from '../src/format/snapshot-name.js';
import { Calendar } from '../src/retention/calendar.js';
import { keptSnapshots, planRetention, type RetentionPolicy } from '../src/retention/retention-plan.js';

/**
 * A store as the sidecar (or ebr) fills it: revisions written over time, deltas every so often, fulls now and
 * then; a full may follow a delta that ends at its revision (ebr), and some fulls are damaged. Revision r puts
 * key `k<r mod 7>` to r, so the keyspace at any revision is known.
 */
interface Model {
  snapshots: CatalogEntry[];
  damaged: Set<string>;
  now: Date;
}

const step = fc.record({
  revisions: fc.integer({ min: 1, max: 30 }),
  minutes: fc.integer({ min: 1, max: 3 * 24 * 60 }),
  full: fc.boolean(),
  deltaFirst: fc.boolean(),
  damaged: fc.integer({ min: 0, max: 9 }),
});

const storeModel: fc.Arbitrary<Model> = fc
  .record({
    steps: fc.array(step, { minLength: 1, maxLength: 40 }),
    nowAfterMinutes: fc.integer({ min: 0, max: 40 * 24 * 60 }),
  })
  .map(({ steps, nowAfterMinutes }) => {
    const snapshots: CatalogEntry[] = [];
    const damaged = new Set<string>();
    let revision = 1;
    let time = Date.UTC(2026, 9, 1) / 1000;
    let deltaFrom = 2;
    const add = (kind: 'Full' | 'Incr', start: number, last: number) => {
      const ref = {
        kind,
        startRevision: start,
        lastRevision: last,
        createdAt: time,
        compression: '.gz' as const,
        final: false,
      };
      const entry = { ...ref, name: snapshotName(ref), size: 10 + last, metadata: {} };
      snapshots.push(entry);
      return entry;
    };
    add('Full', 0, revision);
    for (const s of steps) {
      revision += s.revisions;
      time += s.minutes * 60;
      if (!s.full || s.deltaFirst) {
        add('Incr', deltaFrom, revision);
        deltaFrom = revision + 1;
      }
      if (s.full) {
        time += 1;
        const full = add('Full', 0, revision);
        if (s.damaged === 0) damaged.add(full.name);
        deltaFrom = revision + 1; // the sidecar's deltas go on from the full
      }
    }
    if (deltaFrom <= revision) add('Incr', deltaFrom, revision);
    snapshots.sort((a, b) => a.lastRevision - b.lastRevision || (a.kind === b.kind ? 0 : a.kind === 'Full' ? -1 : 1));
    return { snapshots, damaged, now: new Date((time + nowAfterMinutes * 60) * 1000) };
  });

const policyArb: fc.Arbitrary<RetentionPolicy> = fc.record({
  ebr: fc.option(
    fc.oneof(
      fc.constant({ policy: 'Exponential' as const }),
      fc.integer({ min: 1, max: 5 }).map((maxBackups) => ({ policy: 'LimitBased' as const, maxBackups })),
    ),
    { nil: undefined },
  ),
  keep: fc.record(
    {
      last: fc.integer({ min: 0, max: 3 }),
      hourly: fc.integer({ min: 0, max: 5 }),
      daily: fc.integer({ min: 0, max: 5 }),
      weekly: fc.integer({ min: 0, max: 3 }),
      monthly: fc.integer({ min: 0, max: 2 }),
      withinMs: fc.integer({ min: 0, max: 5 * 86_400_000 }),
    },
    { requiredKeys: [] },
  ),
  deltaRetentionMs: fc.integer({ min: 0, max: 4 * 86_400_000 }),
  maxTotalSize: fc.option(fc.integer({ min: 1, max: 2000 }), { nil: undefined }),
  chunkMaxAgeMs: fc.constant(86_400_000),
  calendar: fc.constantFrom(new Calendar('UTC'), new Calendar('Europe/Berlin'), new Calendar('America/New_York')),
});

/** What restore would produce from these snapshots: the newest full that is not damaged, then its deltas. */
function restore(snapshots: CatalogEntry[], damaged: Set<string>): { revision: number; keyspace: Map<string, number> } {
  const chain = planChains(snapshots).find((c) => !damaged.has(c.full.name));
  if (!chain) throw new Error('no restorable chain');
  const keyspace = new Map<string, number>();
  const put = (r: number) => keyspace.set(`k${r % 7}`, r);
  for (let r = 2; r <= chain.full.lastRevision; r++) put(r);
  let reached = chain.full.lastRevision;
  for (const delta of chain.deltas) {
    if (delta.startRevision > reached + 1) throw new Error(`gap before ${delta.name}`);
    for (let r = Math.max(delta.startRevision, reached + 1); r <= delta.lastRevision; r++) put(r);
    reached = Math.max(reached, delta.lastRevision);
  }
  return { revision: reached, keyspace };
}

describe('retention plans, for any store and any policy', () => {
  it('keep the newest restorable chain: a restore after gc gives the same revision and keyspace as before', () => {
    fc.assert(
      fc.property(storeModel, policyArb, ({ snapshots, damaged, now }, policy) => {
        const restorableFull = [...snapshots].reverse().find((e) => e.kind === 'Full' && !damaged.has(e.name))?.name;
        fc.pre(restorableFull !== undefined);
        const plan = planRetention({ snapshots, chunks: [] }, policy, { now, restorableFull });
        const before = restore(snapshots, damaged);
        const after = restore(keptSnapshots(snapshots, plan), damaged);
        expect(after.revision).toBe(before.revision);
        expect(after.keyspace).toEqual(before.keyspace);
        expect(plan.decisions.find((d) => d.name === restorableFull)?.action).toBe('keep');
      }),
      { numRuns: 500 },
    );
  });

  it('never delete a delta whose full stays unless a newer full covers its revisions', () => {
    fc.assert(
      fc.property(storeModel, policyArb, ({ snapshots, now }, policy) => {
        const restorableFull = snapshots.filter((e) => e.kind === 'Full').at(-1)?.name;
        const plan = planRetention({ snapshots, chunks: [] }, policy, { now, restorableFull });
        const kept = keptSnapshots(snapshots, plan);
        for (const d of plan.decisions.filter((x) => x.kind === 'Incr' && x.action === 'delete')) {
          const delta = snapshots.find((s) => s.name === d.name)!;
          const covered = kept.some((s) => s.kind === 'Full' && s.lastRevision >= delta.lastRevision);
          expect(covered).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('are pure: the same store, policy and clock give the same plan', () => {
    fc.assert(
      fc.property(storeModel, policyArb, ({ snapshots, now }, policy) => {
        const restorableFull = snapshots.filter((e) => e.kind === 'Full').at(-1)?.name;
        const once = planRetention({ snapshots, chunks: [] }, policy, { now, restorableFull });
        const twice = planRetention({ snapshots: [...snapshots], chunks: [] }, policy, { now, restorableFull });
        expect(twice).toEqual(once);
      }),
      { numRuns: 100 },
    );
  });
});
