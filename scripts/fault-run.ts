// The fault run for as long as asked (scripts/fault-run, docs/proof.md §5): seeds run one after another, each a
// whole run of test/fault-run.ts in a temp folder of its own; one line per violation (VIOLATION seed=… step=…), the
// command that replays its seed, and a summary: seeds, steps, operations drawn by kind, violations, minutes.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type FaultRunResult, formatViolation, runFaultRun, runShape } from '../test/fault-run.ts';
import { type FaultKind, faultSchedule, parseOps } from '../test/fault-schedule.ts';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string' },
    seeds: { type: 'string' },
    steps: { type: 'string', default: '12' },
    members: { type: 'string', default: '3' },
    store: { type: 'string' },
    ops: { type: 'string' },
    keep: { type: 'boolean', default: false },
    quiet: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(`scripts/fault-run [--minutes N] [--seeds a,b,c | --seeds COUNT] [--steps N] [--members 1|3]
                 [--store local|s3] [--ops kind,kind] [--keep] [--quiet]
  --minutes N   run new seeds until N minutes have passed (the seed under way finishes)
  --seeds LIST  these seeds (one seed: "7,"); a number without a comma is a count of random seeds (default 1)
  --steps N     steps a seed (default 12)
  --members     1 (a local store) or 3 (an S3 store behind the fault proxy; default)
  --ops         draw only these kinds (as FAULT_RUN_OPS)
  --keep        keep the temp folder of a seed with violations (etcd, sidecar and program logs)
  --quiet       print violations and the summary only, not each step`);
  process.exit(0);
}
const minutes = values.minutes === undefined ? undefined : Number(values.minutes);
const steps = Number(values.steps);
const members = values.members === '1' ? 1 : 3;
const store = (values.store ?? (members === 3 ? 's3' : 'local')) as 'local' | 's3';
const only = parseOps(values.ops);
const listed = values.seeds?.includes(',')
  ? values.seeds
      .split(',')
      .filter((s) => s !== '')
      .map(Number)
  : undefined;
const count = listed ? listed.length : values.seeds ? Number(values.seeds) : minutes === undefined ? 1 : Infinity;
if (!Number.isInteger(steps) || steps < 1 || (listed ?? []).some((s) => !Number.isInteger(s))) {
  console.error('scripts/fault-run: --steps and --seeds take whole numbers (see --help)');
  process.exit(2);
}

const started = Date.now();
const deadline = minutes === undefined ? Infinity : started + minutes * 60_000;
const results: FaultRunResult[] = [];
const drawn = new Map<FaultKind, number>();
const replay = (seed: number) =>
  `scripts/fault-run --seeds ${seed}, --steps ${steps} --members ${members} --store ${store}${only ? ` --ops ${only.join(',')}` : ''}`;

for (let n = 0; n < count && Date.now() < deadline; n++) {
  const seed = listed ? listed[n] : Math.floor(Math.random() * 2 ** 31);
  for (const s of faultSchedule(seed, steps, runShape(members, store, only)))
    drawn.set(s.fault.kind, (drawn.get(s.fault.kind) ?? 0) + 1);
  const dir = await mkdtemp(join(tmpdir(), `fault-run-${seed}-`));
  console.log(`== seed ${seed}: ${steps} steps, ${members} member(s), ${store} store (${dir})`);
  let result: FaultRunResult | undefined;
  try {
    result = await runFaultRun({
      seed,
      steps,
      members,
      store,
      only,
      at: (...names) => join(dir, ...names),
      log: (line) => {
        if (!values.quiet || line.startsWith('VIOLATION')) console.log(`[${seed}] ${line}`);
      },
    });
    results.push(result);
    const perStep = result.stepSeconds.length > 0 ? result.seconds / result.stepSeconds.length : 0;
    console.log(
      `== seed ${seed}: ${result.violations.length} violation(s), ${result.checks} check(s), revision ${result.revision} in ${result.timelines} timeline(s), ${result.writes} writes, ${result.seconds.toFixed(0)} s (${perStep.toFixed(1)} s a step)${result.aborted ? `; stopped: ${result.aborted}` : ''}`,
    );
    if (result.violations.length > 0) console.log(`   replay: ${replay(seed)}`);
  } catch (err) {
    console.log(`== seed ${seed}: the run failed: ${err instanceof Error ? err.stack : err}`);
    console.log(`   replay: ${replay(seed)}`);
  } finally {
    if (values.keep && (!result || result.violations.length > 0)) console.log(`   kept ${dir}`);
    else await rm(dir, { recursive: true, force: true });
  }
}

const violations = results.flatMap((r) => r.violations);
console.log('\n== summary');
console.log(`seeds: ${results.map((r) => r.seed).join(', ') || 'none'} (${results.length} run)`);
console.log(`steps: ${results.reduce((a, r) => a + r.stepSeconds.length, 0)}`);
console.log(
  `operations drawn: ${[...drawn]
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${k} ${n}`)
    .join(', ')}`,
);
console.log(`violations: ${violations.length}`);
for (const v of violations) console.log(`  ${formatViolation(v)}`);
console.log(`minutes: ${((Date.now() - started) / 60_000).toFixed(1)}`);
process.exitCode = violations.length > 0 || results.length === 0 ? 1 : 0;
