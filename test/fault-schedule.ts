import { seededRandom } from '@etcd-steward/testing';
/**
 * The schedule of a fault run (docs/proof.md §5), drawn from a seed: the same seed and shape give the same faults.
 * `member` says which member (its etcd, its sidecar) a fault hits in a 3-member run; a 1-member run draws the same
 * schedules it always did.
 */
export type Fault =
  | { kind: 'kill-sidecar'; downMs: number; member?: number }
  | { kind: 'kill-etcd'; downMs: number; member?: number }
  | { kind: 'store-outage'; downMs: number }
  | { kind: 'etcd-compaction'; behind: number }
  | { kind: 'defragment'; member?: number }
  | { kind: 'full-snapshot' }
  | { kind: 'compact-program' }
  | { kind: 'gc-program' }
  | { kind: 'move-leader'; member: number }
  | { kind: 'store-errors'; ms: number; rate: number }
  | { kind: 'nospace' }
  | { kind: 'writes'; ms: number };

export interface ScheduleShape {
  members: 1 | 3;
  /** Whether the store can answer with errors (S3 behind the fault proxy). */
  storeErrors: boolean;
  /** Whether etcd runs with a small quota that a burst of big values fills (NOSPACE). */
  nospace?: boolean;
}

/** The run's seeded random numbers (re-exported so that the run and its schedule draw alike). */
export const prng = seededRandom;

/** The schedule a seed gives: `steps` faults, each followed by writes. */
export function faultSchedule(
  seed: number,
  steps: number,
  shape: ScheduleShape = { members: 1, storeErrors: false },
): Fault[] {
  const random = prng(seed);
  const ms = (min: number, max: number) => Math.round(min + random() * (max - min));
  const member = () => (shape.members === 3 ? { member: Math.floor(random() * 3) } : {});
  const kinds: Array<() => Fault> = [
    () => ({ kind: 'kill-sidecar', downMs: ms(0, 3000), ...member() }),
    () => ({ kind: 'kill-etcd', downMs: ms(0, 3000), ...member() }),
    () => ({ kind: 'store-outage', downMs: ms(500, 5000) }),
    () => ({ kind: 'etcd-compaction', behind: ms(0, 300) }),
    () => ({ kind: 'defragment', ...member() }),
    () => ({ kind: 'full-snapshot' }),
    () => ({ kind: 'compact-program' }),
    () => ({ kind: 'gc-program' }),
  ];
  if (shape.members === 3) kinds.push(() => ({ kind: 'move-leader', member: Math.floor(random() * 3) }));
  if (shape.storeErrors) kinds.push(() => ({ kind: 'store-errors', ms: ms(1000, 6000), rate: ms(10, 60) / 100 }));
  if (shape.nospace) kinds.push(() => ({ kind: 'nospace' }));
  const schedule: Fault[] = [];
  for (let i = 0; i < steps; i++) {
    schedule.push(kinds[Math.floor(random() * kinds.length)]());
    schedule.push({ kind: 'writes', ms: ms(300, 2000) });
  }
  return schedule;
}

export function describeFault(f: Fault): string {
  return Object.entries(f)
    .map(([k, v]) => (k === 'kind' ? String(v) : `${k}=${v}`))
    .join(' ');
}
