import { LocalStore, OperationError, UsageError } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';
import { ebrStoreDir } from '../../../test/fixtures.js';
import { describePlan, formatPlan, planRestore } from '../src/restore/restore-plan.js';

const fixture = new LocalStore(ebrStoreDir);

describe('planRestore', () => {
  it('plans the newest chain first and the older full as a fallback', async () => {
    const plan = await planRestore(fixture, {});
    expect(plan.newestRevision).toBe(9);
    expect(plan.chains.map((c) => c.full.name)).toEqual([
      'v2/Full-00000000-00000007-1795299379',
      'v2/Full-00000000-00000003-1795299353.gz',
    ]);
    expect(formatPlan(plan)).toContain('plan: restore the newest revision (9)');
    expect(describePlan(plan)).toMatchObject({ newestRevision: 9, chains: [{ reaches: 9 }, { reaches: 9 }] });
  });

  it('keeps to the chosen full snapshot', async () => {
    const plan = await planRestore(fixture, { snapshot: 'Full-00000000-00000003-1795299353.gz' });
    expect(plan.chains).toHaveLength(1);
    expect(plan.chains[0].deltas.map((d) => d.lastRevision)).toEqual([7, 8, 9]);
  });

  it('refuses targets nothing in the store can meet, before any download', async () => {
    await expect(planRestore(fixture, { toRevision: 10 })).rejects.toThrow(UsageError);
    await expect(planRestore(fixture, { toRevision: 2 })).rejects.toThrow(/before the oldest full snapshot/);
    await expect(planRestore(fixture, { snapshot: 'Full-00000000-00000001-1' })).rejects.toThrow(
      /no such full snapshot/,
    );
    await expect(planRestore(new LocalStore('/nonexistent-store'), {})).rejects.toThrow(OperationError);
  });
});
