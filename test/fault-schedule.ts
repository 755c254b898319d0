import { seededRandom } from '@etcd-steward/testing';

/**
 * The schedule of a fault run (docs/proof.md §5), drawn from a seed: the same seed, shape and operations give the
 * same steps. A step is a fault or an operation, the writes after it, whether the next step may begin while it is
 * still in effect (`overlap`), and whether the oracle checks the store after it (`check`). `member` says which
 * member (its etcd, its sidecar) a fault hits in a 3-member run.
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
  /** Several on-demand full snapshots, `gapMs` apart, all within one delta period (1 s). */
  | { kind: 'full-burst'; count: number; gapMs: number }
  /** Every sidecar stopped, etcd compacted `behind` its head meanwhile, the sidecars started again. */
  | { kind: 'compaction-sidecar-down'; downMs: number; behind: number }
  /** A member's data dir lost (`wiped`) or both bbolt meta pages damaged, then `etcd-validate bootstrap`. */
  | { kind: 'member-lost'; damage: 'wiped' | 'damaged'; member?: number }
  /** A new etcd on the store (its revision past the store's newest when `past`): its sidecar must refuse. */
  | { kind: 'new-cluster'; past: boolean }
  | RestoreFault;

/**
 * The cluster restored from the store with etcd-restore (every member), the sidecars started again on their old
 * spool dirs. `back` (0..1) picks the revision among those of the cluster's history the store covers, 0 the
 * oldest; undefined restores the newest. `spoolMs`: the store is down that long while writes arrive before the
 * sidecars stop (their deltas wait in the spool); `outageMs`: the store stays down for the sidecars through the
 * restore and that long after (the restore reads it past the outage); `programs`: etcd-compact and etcd-gc run
 * while the restore or the sidecar sets the abandoned snapshots aside; `compactAfterMs`: the restored cluster takes
 * writes that long, then etcd compacts at its head, all before the sidecars start (they cannot compare the
 * revisions past the fork any more).
 */
export interface RestoreFault {
  kind: 'restore-earlier' | 'restore-fork' | 'restore-spooled' | 'restore-outage' | 'fork-programs';
  fork: boolean;
  back?: number;
  spoolMs?: number;
  outageMs?: number;
  programs?: boolean;
  compactAfterMs?: number;
}

export type FaultKind = Fault['kind'];

export interface Step {
  fault: Fault;
  /** The next step begins while this one is still in effect (only faults that stop no whole cluster). */
  overlap: boolean;
  /** Writes after the fault has begun, before the next step. */
  writesMs: number;
  /** The oracle checks the store after this step (besides midway and at the end). */
  check: boolean;
}

export interface ScheduleShape {
  members: 1 | 3;
  /** Whether the store can answer with errors (S3 behind the fault proxy). */
  storeErrors: boolean;
  /** Whether etcd runs with a small quota that a burst of big values fills (NOSPACE). */
  nospace?: boolean;
  /** Draw only these kinds (FAULT_RUN_OPS); default: every kind the shape allows. */
  only?: readonly FaultKind[];
}

/** The run's seeded random numbers (re-exported so that the run and its schedule draw alike). */
export const prng = seededRandom;

/**
 * Operations that stop the whole cluster, every sidecar, or the one store they share (or start another cluster on
 * it): they wait for whatever is still in effect, and nothing overlaps them.
 */
export const EXCLUSIVE: ReadonlySet<FaultKind> = new Set<FaultKind>([
  'restore-earlier',
  'restore-fork',
  'restore-spooled',
  'restore-outage',
  'fork-programs',
  'member-lost',
  'new-cluster',
  'compaction-sidecar-down',
]);

/** Every kind, with how often it is drawn (the operations cost more time than a fault: they are drawn less). */
const WEIGHTS: Record<FaultKind, number> = {
  'kill-sidecar': 1,
  'kill-etcd': 1,
  'store-outage': 1,
  'etcd-compaction': 1,
  defragment: 1,
  'full-snapshot': 1,
  'compact-program': 1,
  'gc-program': 1,
  'move-leader': 1,
  'store-errors': 1,
  nospace: 1,
  'full-burst': 1,
  'compaction-sidecar-down': 0.6,
  'member-lost': 0.6,
  'new-cluster': 0.4,
  'restore-earlier': 0.6,
  'restore-fork': 0.6,
  'restore-spooled': 0.5,
  'restore-outage': 0.5,
  'fork-programs': 0.5,
};

export const FAULT_KINDS = Object.keys(WEIGHTS) as FaultKind[];

/** The kinds a shape allows: leader moves need several members, error windows the S3 store, NOSPACE its quota. */
export function kindsFor(shape: ScheduleShape): FaultKind[] {
  return FAULT_KINDS.filter(
    (k) =>
      (k !== 'move-leader' || shape.members === 3) &&
      (k !== 'store-errors' || shape.storeErrors) &&
      (k !== 'nospace' || shape.nospace === true) &&
      (!shape.only || shape.only.includes(k)),
  );
}

/** FAULT_RUN_OPS (`restore-fork,full-burst`) as kinds; an unknown name throws, listing the known ones. */
export function parseOps(text: string | undefined): FaultKind[] | undefined {
  if (!text?.trim()) return undefined;
  const names = text.split(',').map((s) => s.trim());
  const unknown = names.filter((n) => !(FAULT_KINDS as string[]).includes(n));
  if (unknown.length > 0) throw new Error(`unknown operation ${unknown.join(', ')}; known: ${FAULT_KINDS.join(', ')}`);
  return names as FaultKind[];
}

/** The schedule a seed gives: `steps` steps. */
export function faultSchedule(
  seed: number,
  steps: number,
  shape: ScheduleShape = { members: 1, storeErrors: false },
): Step[] {
  const random = prng(seed);
  const ms = (min: number, max: number) => Math.round(min + random() * (max - min));
  const member = () => (shape.members === 3 ? { member: Math.floor(random() * 3) } : {});
  const compact = () => (random() < 0.35 ? { compactAfterMs: ms(200, 1500) } : {});
  const draw: Record<FaultKind, () => Fault> = {
    'kill-sidecar': () => ({ kind: 'kill-sidecar', downMs: ms(0, 3000), ...member() }),
    'kill-etcd': () => ({ kind: 'kill-etcd', downMs: ms(0, 3000), ...member() }),
    'store-outage': () => ({ kind: 'store-outage', downMs: ms(500, 5000) }),
    'etcd-compaction': () => ({ kind: 'etcd-compaction', behind: ms(0, 300) }),
    defragment: () => ({ kind: 'defragment', ...member() }),
    'full-snapshot': () => ({ kind: 'full-snapshot' }),
    'compact-program': () => ({ kind: 'compact-program' }),
    'gc-program': () => ({ kind: 'gc-program' }),
    'move-leader': () => ({ kind: 'move-leader', member: Math.floor(random() * 3) }),
    'store-errors': () => ({ kind: 'store-errors', ms: ms(1000, 6000), rate: ms(10, 60) / 100 }),
    nospace: () => ({ kind: 'nospace' }),
    'full-burst': () => ({ kind: 'full-burst', count: ms(2, 5), gapMs: ms(0, 250) }),
    'compaction-sidecar-down': () => ({ kind: 'compaction-sidecar-down', downMs: ms(500, 3000), behind: ms(0, 50) }),
    'member-lost': () => ({ kind: 'member-lost', damage: random() < 0.5 ? 'wiped' : 'damaged', ...member() }),
    'new-cluster': () => ({ kind: 'new-cluster', past: random() < 0.5 }),
    'restore-earlier': () => ({ kind: 'restore-earlier', fork: false, back: ms(0, 100) / 100, ...compact() }),
    'restore-fork': () => ({ kind: 'restore-fork', fork: true, back: ms(0, 100) / 100, ...compact() }),
    'restore-spooled': () => ({ kind: 'restore-spooled', fork: random() < 0.5, spoolMs: ms(1000, 4000) }),
    'restore-outage': () => {
      const fork = random() < 0.5;
      const earlier = random() < 0.5;
      return {
        kind: 'restore-outage',
        fork,
        ...(earlier ? { back: ms(0, 100) / 100 } : {}),
        spoolMs: ms(1000, 3000),
        outageMs: ms(500, 4000),
      };
    },
    'fork-programs': () => ({
      kind: 'fork-programs',
      fork: random() < 0.5,
      back: ms(0, 100) / 100,
      programs: true,
      ...compact(),
    }),
  };
  const kinds = kindsFor(shape);
  if (kinds.length === 0) throw new Error('no operation left to draw: check FAULT_RUN_OPS against the shape');
  const total = kinds.reduce((sum, k) => sum + WEIGHTS[k], 0);
  const pick = (): FaultKind => {
    let x = random() * total;
    for (const k of kinds) {
      x -= WEIGHTS[k];
      if (x < 0) return k;
    }
    return kinds[kinds.length - 1];
  };
  const schedule: Step[] = [];
  for (let i = 0; i < steps; i++) {
    const fault = draw[pick()]();
    const overlap = random() < 0.35 && !EXCLUSIVE.has(fault.kind);
    schedule.push({ fault, overlap, writesMs: ms(300, 2000), check: random() < 0.15 });
  }
  return schedule;
}

export function describeFault(f: Fault): string {
  return Object.entries(f)
    .map(([k, v]) => (k === 'kind' ? String(v) : `${k}=${v}`))
    .join(' ');
}

export function describeStep(s: Step): string {
  return `${describeFault(s.fault)}${s.overlap ? ' (overlaps the next)' : ''}${s.check ? ' (then a check)' : ''}`;
}
