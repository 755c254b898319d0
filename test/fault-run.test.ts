import { expect, it } from 'vitest';
import { describeFault, faultSchedule, runFaultRun, runShape } from './fault-run.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('fault-run-');

/**
 * The randomized fault run (fault-run.ts, docs/proof.md §5), bounded for CI: three members and three sidecars on an
 * S3 store behind the fault proxy. FAULT_RUN_SEED replays a run, FAULT_RUN_STEPS makes it longer,
 * FAULT_RUN_MEMBERS=1 runs one member (on a local store unless FAULT_RUN_STORE=s3). The seed and the schedule are
 * printed first, and again with a failure.
 */
const seed = Number(process.env.FAULT_RUN_SEED ?? Math.floor(Math.random() * 2 ** 31));
const steps = Number(process.env.FAULT_RUN_STEPS ?? 6);
const members = process.env.FAULT_RUN_MEMBERS === '1' ? 1 : 3;
const store = (process.env.FAULT_RUN_STORE ?? (members === 3 ? 's3' : 'local')) as 'local' | 's3';

it(
  'a random schedule of faults leaves a store that restores and proves against etcd',
  async () => {
    const lines: string[] = [];
    const log = (line: string) => {
      lines.push(line);
      console.log(`[fault run ${seed}] ${line}`);
    };
    log(
      `seed ${seed}, ${steps} steps, ${members} member(s), ${store} store: ${faultSchedule(
        seed,
        steps,
        runShape(members, store),
      )
        .filter((f) => f.kind !== 'writes')
        .map(describeFault)
        .join('; ')}`,
    );
    const result = await runFaultRun({ seed, steps, members, store, at, log });
    const replay = `replay: FAULT_RUN_SEED=${seed} FAULT_RUN_STEPS=${steps} FAULT_RUN_MEMBERS=${members} FAULT_RUN_STORE=${store} scripts/test test/fault-run.test.ts\n${lines.join('\n')}`;
    const end = result.checkpoints.find((c) => c.at === 'end');
    expect(end?.code, replay).toBe(0);
    // Midway the sidecar may lag behind a compaction etcd just made: not provable yet is an answer, a wrong one is not.
    for (const c of result.checkpoints) expect([0, 5], `${c.at}: ${c.summary}\n${replay}`).toContain(c.code);
    expect(result.writes, replay).toBeGreaterThan(0);
    // a longer run gets time in proportion
  },
  Math.max(180_000, steps * 20_000),
);
